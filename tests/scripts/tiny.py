"""Child-side helpers for the end-to-end scripts: tiny models, a tiny tokenizer, reporting results.

Scripts run in a fresh interpreter (like a user's training script) with this
directory on PYTHONPATH; they print one `RESULT <json>` line the test reads.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch


def config():
    """A fresh tiny Llama config (one per model: from_config writes the attention implementation into it)."""
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)


def gpu_config():
    """A fresh tiny Llama config whose attention the Triton kernel of the fixtures serves."""
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=128,
                       max_position_embeddings=128, pad_token_id=0, eos_token_id=1, bos_token_id=1)


def model(attn_implementation: str):
    """A random-initialised tiny Llama with `attn_implementation`."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config(), attn_implementation=attn_implementation, dtype=torch.float32)


def train_step(net) -> float:
    """One forward and backward pass; returns the loss."""
    input_ids = torch.randint(0, 128, (2, 12))
    loss = net(input_ids, labels=input_ids).loss
    loss.backward()
    assert net.model.layers[0].self_attn.q_proj.weight.grad is not None
    return float(loss)


def kernel_module(repo: str):
    """The loaded fixture kernel module of `repo` (the one kernels imported last)."""
    import kernels

    for loaded in reversed(kernels.get_loaded_kernels()):
        module = sys.modules.get(loaded.metadata.id)
        if module is not None and getattr(module, "KERNEL_IDENTITY", {}).get("repo") == repo:
            return module
    raise LookupError(f"no kernel of {repo} is loaded")


def identity(repo: str) -> dict:
    """KERNEL_IDENTITY of the loaded kernel of `repo`, with its CALLS counters."""
    module = kernel_module(repo)
    return {**module.KERNEL_IDENTITY, "calls": dict(getattr(module, "CALLS", {}))}


def tokenizer(path: Path):
    """A char-level tokenizer built offline and saved to `path` (no downloads)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{chr(c): i + 3 for i, c in enumerate(range(32, 127))}}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.model_max_length = 64
    tok.save_pretrained(path)
    return tok


def texts() -> dict[str, list[str]]:
    """A tiny language-modelling data set."""
    return {"text": [f"kernel {i} locked to a commit" for i in range(8)]}


def result(**values) -> None:
    """Report results to the test."""
    print("RESULT " + json.dumps(values, default=str), flush=True)


def loaded_kernels() -> dict[str, types.ModuleType]:
    """Imported fixture kernel modules by module name."""
    return {name: m for name, m in list(sys.modules.items()) if "." not in name and hasattr(m, "KERNEL_IDENTITY")}


def step_through(net) -> dict:
    """Train one step; report the loss and the identity of every kernel build whose CALLS moved."""
    before = {name: dict(getattr(m, "CALLS", {})) for name, m in loaded_kernels().items()}
    loss = train_step(net)
    used = [m.KERNEL_IDENTITY for name, m in loaded_kernels().items() if dict(getattr(m, "CALLS", {})) != before.get(name, {})]
    return {"loss": loss, "used": used, "impl": net.config._attn_implementation}
