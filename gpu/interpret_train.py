"""Transformers -> locked Hub kernel -> the fixture's Triton forward, on a CPU, via Triton's interpreter.

The fixture takes the Triton path only for CUDA tensors; this forces it for CPU tensors, so the
whole chain the GPU run uses (kernlock.apply(), attn_implementation="kernels-community/flash-attn2",
dense and padded/varlen calls, Triton forward, torch backward) runs here, in float32 (Triton 3.6's
interpreter mishandles bf16 dot operands). Logits, loss and a gradient are compared with the same
model on sdpa. Needs triton (and numpy < 2.3 for its interpreter), plus the kernlock stack:

    TRITON_INTERPRET=1 PYTHONPATH=<site with kernlock, kernels, transformers> python gpu/interpret_train.py
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
ROOT = Path(__file__).resolve().parents[1]


def rel(a, b) -> float:
    return float((a.detach() - b.detach()).norm() / b.detach().norm())


def main() -> int:
    from kernlock.testing.fixtures import build_fixture_repos
    from kernlock.testing.hub import TestHub

    work = Path(tempfile.mkdtemp(prefix="kernlock-interp-"))
    hub = TestHub(build_fixture_repos(ROOT / "fixtures", work / "repos")).start()
    os.environ.update(HF_ENDPOINT=hub.url, HF_HOME=str(work / "hf"), HF_HUB_DISABLE_PROGRESS_BARS="1")
    import kernlock

    print(kernlock.apply(ROOT / "gpu" / "project-nocuda" / "kernels.lock"))  # the CPU lock covers this machine
    import torch
    from kernels import get_loaded_kernels
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=1, vocab_size=128, max_position_embeddings=128)
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="sdpa", dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="kernels-community/flash-attn2",
                                             dtype=torch.float32)
    model.load_state_dict(reference.state_dict())
    module = next(k.module for k in get_loaded_kernels() if k.repo_info.repo_id == "kernels-community/flash-attn2")
    module._triton_eligible = lambda *args: module._triton_kernel() is not None  # CPU tensors too
    ids = torch.randint(0, 128, (2, 40))
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    worst = 0.0
    for name, kwargs in (("dense", {}), ("padded (varlen)", {"attention_mask": mask})):
        labels = ids.masked_fill(~mask.bool(), -100) if kwargs else ids
        out, expected = (m(input_ids=ids, labels=labels, **kwargs) for m in (model, reference))
        out.loss.backward()
        expected.loss.backward()
        keep = mask.bool() if kwargs else torch.ones_like(mask, dtype=torch.bool)
        figures = {
            "logits": rel(out.logits[keep], expected.logits[keep]),
            "loss": abs(out.loss.item() - expected.loss.item()) / expected.loss.item(),
            "q_proj.grad": rel(model.model.layers[0].self_attn.q_proj.weight.grad,
                               reference.model.layers[0].self_attn.q_proj.weight.grad),
        }
        worst = max(worst, *figures.values())
        print(f"{name:16s} " + "  ".join(f"{k} rel err {v:.1e}" for k, v in figures.items()))
        model.zero_grad()
        reference.zero_grad()
    print("CALLS", module.CALLS)
    print("loaded", module.KERNEL_IDENTITY)
    hub.stop()
    ok = worst < 1e-4 and module.CALLS["triton_forward"] == 4 and module.CALLS["torch_forward"] == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
