"""The user's model path on a GPU under the lock (issue 33): Transformers 5.25 kernelizes a model on
CUDA with Hub layer kernels by default, and `kernlock.apply()` serves them from the lock.

A tiny Llama saved with `save_pretrained` is declared in `[tool.kernlock] models`, locked for this
GPU's target and synced; a fresh interpreter loads it as a user's script does and trains it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from helpers import FA2, LockedProject
from kernlock.testing.hub import TestHub
from scripts.harness import CLIENT_CHATTER, ok, python

pytestmark = pytest.mark.gpu

LIGER = "kernels-community/liger-kernels"
ROTARY = "kernels-community/rotary"
ACTIVATION = "kernels-community/activation"
# What Transformers kernelizes a training Llama's layers with on CUDA, and the fixture's counter.
LAYER_CALLS = {LIGER: "rms_norm", ROTARY: "apply_rotary"}
LOADS = {
    "device_map": 'from_pretrained("model", device_map="cuda", **kwargs)',
    "to_cuda": 'from_pretrained("model", **kwargs).to("cuda")',
}
TRAIN = """
import kernlock
kernlock.apply()
from transformers import AutoModelForCausalLM
kwargs = {"attn_implementation": "kernels-community/flash-attn2", "dtype": torch.bfloat16}
model = AutoModelForCausalLM.LOAD.train()
reference = AutoModelForCausalLM.from_pretrained(
    "model", attn_implementation="sdpa", dtype=torch.bfloat16, use_kernels=False, device_map="cuda")
reference.train()
torch.manual_seed(1)
batches = [torch.randint(3, 98, (4, 32), device="cuda") for _ in range(5)]
losses = {}
for name, net in (("kernels", model), ("reference", reference)):
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    losses[name] = []
    for ids in batches:
        loss = net(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses[name].append(loss.item())
kernels = {m.KERNEL_IDENTITY["repo"]: {**m.KERNEL_IDENTITY, "calls": m.CALLS}
           for m in tiny.loaded_kernels().values()}
tiny.result(losses=losses, kernels=kernels, device=str(next(model.parameters()).device))
"""


def test_the_declared_model_locks_its_layer_kernels_for_this_gpu(
        declared_model: LockedProject) -> None:
    lock = declared_model.lock
    assert {k.spec for k in lock.kernels} == {FA2, f"{LIGER}@v4", f"{ROTARY}@v2",
                                              f"{ACTIVATION}@v1"}
    [target] = lock.targets
    assert target.backend.startswith("cu"), target  # this machine's target: a CUDA build
    assert all(k.variant_for(target) is not None for k in lock.kernels)


@pytest.mark.parametrize("load", sorted(LOADS))
def test_a_declared_model_trains_on_cuda_with_the_locked_layer_kernels(
        hub: TestHub, declared_model: LockedProject, load: str,
        record_property: Callable[[str, object], None]) -> None:
    """`from_pretrained(..., device_map="cuda")` or `.to("cuda")`, then `.train()`: the layer
    kernels Transformers maps run, each from the locked commit and variant, computing what
    Transformers' own layers compute, and the warm cache asks the Hub for nothing."""
    hub.reset_counts()
    result = ok(python(TRAIN.replace("LOAD", LOADS[load]), declared_model.path))
    assert [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)] == []
    assert result["device"] == "cuda:0"
    [target] = declared_model.lock.targets
    for entry in declared_model.lock.kernels:
        if entry.repo in (*LAYER_CALLS, FA2):
            loaded = result["kernels"][entry.repo]
            assert (loaded["commit"], loaded["variant"]) == (entry.commit,
                                                             entry.variant_for(target).name)
    for repo, counter in LAYER_CALLS.items():
        assert result["kernels"][repo]["calls"][counter] > 0, result["kernels"][repo]
    attention = result["kernels"][FA2]["calls"]
    assert attention["triton_forward"] > 0 and attention["torch_forward"] == 0, attention
    kernels, reference = result["losses"]["kernels"], result["losses"]["reference"]
    assert all(math.isfinite(x) for x in kernels + reference)
    worst = max(abs(a - b) / abs(b) for a, b in zip(kernels, reference, strict=True))
    assert worst < 2e-2, (kernels, reference)
    record_property("losses", kernels)
    record_property("max_rel_diff_vs_transformers", worst)
    record_property("calls", {repo: result["kernels"][repo]["calls"]
                              for repo in (*LAYER_CALLS, FA2)})
