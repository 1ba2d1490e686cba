"""Tiny configs of the model families Transformers loads Hub kernels for: `config.json` only, as a saved
checkpoint has it (`architectures`, and `quantization_config` for the quantized ones)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import transformers as T

SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64}
MXFP4 = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}

def families() -> dict:
    """family → (config, architecture, quantization_config or None)."""
    return {
        "llama": (T.LlamaConfig(**SMALL), "LlamaForCausalLM", None),
        "qwen3": (T.Qwen3Config(**SMALL, head_dim=16), "Qwen3ForCausalLM", None),
        "qwen3_moe": (T.Qwen3MoeConfig(**SMALL, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32), "Qwen3MoeForCausalLM", None),
        "mixtral": (T.MixtralConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2), "MixtralForCausalLM", None),
        "gpt_oss": (T.GptOssConfig(**SMALL, head_dim=16, num_local_experts=4, num_experts_per_tok=2), "GptOssForCausalLM", None),
        "gpt_oss_mxfp4": (T.GptOssConfig(**SMALL, head_dim=16, num_local_experts=4, num_experts_per_tok=2), "GptOssForCausalLM", MXFP4),
        "deepseek_v3_fp8": (T.DeepseekV3Config(**SMALL, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=1, n_group=1, topk_group=1), "DeepseekV3ForCausalLM", FP8),
        "qwen3_next": (T.Qwen3NextConfig(**SMALL, head_dim=16, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16), "Qwen3NextForCausalLM", None),
        "mamba2": (T.Mamba2Config(hidden_size=64, num_hidden_layers=2, vocab_size=128, num_heads=8, head_dim=16, state_size=16, n_groups=1, expand=2), "Mamba2ForCausalLM", None),
        "falcon_mamba": (T.FalconMambaConfig(hidden_size=64, num_hidden_layers=2, vocab_size=128, state_size=16), "FalconMambaForCausalLM", None),
        "jamba": (T.JambaConfig(**SMALL, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_dt_rank=8, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1), "JambaForCausalLM", None),
        "falcon_h1": (T.FalconH1Config(**SMALL, head_dim=16, mamba_d_ssm=64, mamba_n_heads=8, mamba_d_head=8, mamba_d_state=8), "FalconH1ForCausalLM", None),
        "rwkv": (T.RwkvConfig(hidden_size=64, num_hidden_layers=2, vocab_size=128, attention_hidden_size=64, intermediate_size=128, context_length=64), "RwkvForCausalLM", None),
        "granitemoe_swa": (T.GraniteMoeSWAConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2), "GraniteMoeSWAForCausalLM", None),
        "yoso": (T.YosoConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=128, max_position_embeddings=64), "YosoForMaskedLM", None),
        "mra": (T.MraConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=128, max_position_embeddings=64), "MraForMaskedLM", None),
    }

def save(root: Path, only: str | None = None) -> None:
    """Write each family's config.json to `root/<family>/` (only `only`, if given)."""
    for name, (config, arch, quant) in families().items():
        if only is not None and name != only:
            continue
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        config.architectures = [arch]
        config.save_pretrained(d)
        if quant:
            data = json.loads((d / "config.json").read_text())
            data["quantization_config"] = quant
            (d / "config.json").write_text(json.dumps(data, indent=2))

if __name__ == "__main__":
    save(Path(sys.argv[1]))
