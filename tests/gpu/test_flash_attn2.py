"""flash-attn2 end to end on a GPU (issue 8): lock -> verify -> `kernlock.apply()` -> train.

The fixture's kernels-community/flash-attn2 runs a Triton forward on CUDA (and torch's backward);
a bf16 Llama on `attn_implementation="kernels-community/flash-attn2"` must load the locked CUDA
build, take the Triton path (dense, and varlen on a padded batch) and train as the same model on
SDPA does. A lock without this machine's target stops `apply()`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import kernlock
from helpers import FA2, FIXTURE_CPU, LockedProjectFactory, run_kernlock
from kernlock.testing.hub import TestHub
from scripts.harness import ok, only_locked_files_requested, python

pytestmark = pytest.mark.gpu

TRAIN = """
import kernlock
kernlock.apply()
from transformers import AutoModelForCausalLM


def build(attn):
    torch.manual_seed(0)
    with torch.device("cuda"):
        return AutoModelForCausalLM.from_config(tiny.gpu_config(), attn_implementation=attn,
                                                dtype=torch.bfloat16)


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


model, reference = build("kernels-community/flash-attn2"), build("sdpa")
reference.load_state_dict(model.state_dict())
module = tiny.kernel_module("kernels-community/flash-attn2")
batch = torch.randint(3, 98, (4, 64), generator=torch.Generator().manual_seed(1)).cuda()
mask = torch.ones_like(batch)
mask[-1, 48:] = 0  # right padding: Transformers' varlen path
before = dict(module.CALLS)
with torch.no_grad():
    padded = [net(input_ids=batch, attention_mask=mask).logits[mask.bool()]
              for net in (model, reference)]
padded_calls = {k: module.CALLS[k] - before[k] for k in module.CALLS}
before = dict(module.CALLS)
losses = []
for net in (model, reference):
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    losses.append([])
    for _ in range(5):
        loss = net(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses[-1].append(loss.item())
tiny.result(identity=module.KERNEL_IDENTITY, padded_rel_err=rel(*padded), padded_calls=padded_calls,
            train_calls={k: module.CALLS[k] - before[k] for k in module.CALLS}, losses=losses)
"""


def test_a_locked_flash_attn2_trains_a_llama_on_the_triton_path(
        hub: TestHub, locked_project: LockedProjectFactory,
        record_property: Callable[[str, object], None]) -> None:
    target = kernlock.current_target()
    project, lock = locked_project([FA2], targets=[str(target)])
    verified = run_kernlock("verify", cwd=project)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    [entry] = lock.kernels
    hub.reset_counts()
    result = ok(python(TRAIN, project))  # a cold cache: apply() downloads what the lock holds
    only_locked_files_requested(hub, lock, target)
    identity = result["identity"]
    variant = entry.variant_for(target)
    assert (identity["commit"], identity["variant"]) == (entry.commit, variant.name)
    train, padded = result["train_calls"], result["padded_calls"]
    assert train["triton_forward"] > 0 and train["torch_forward"] == 0, train
    assert train["torch_backward"] > 0, train
    assert padded["flash_attn_varlen_func"] > 0 and padded["triton_forward"] > 0, padded
    assert result["padded_rel_err"] < 2e-2
    kernel, sdpa = result["losses"]
    assert all(math.isfinite(x) for x in kernel + sdpa)
    worst = max(abs(a - b) / abs(b) for a, b in zip(kernel, sdpa, strict=True))
    assert worst < 2e-2, (kernel, sdpa)
    record_property("variant", f"{identity['variant']} @ {identity['commit'][:12]}")
    record_property("losses_kernel_sdpa", list(zip(kernel, sdpa, strict=True)))
    record_property("calls", {"train": train, "padded": padded})


def test_a_lock_without_this_gpus_target_stops_apply(
        locked_project: LockedProjectFactory, release_applied_lock: None) -> None:
    project, _ = locked_project([FA2], targets=[FIXTURE_CPU])
    with pytest.raises(kernlock.NoVariantError) as refused:
        kernlock.apply(project / "kernels.lock")
    assert str(kernlock.current_target()) in str(refused.value)
