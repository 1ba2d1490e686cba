"""`kernlock.apply()` end to end: every way Transformers and kernels load a kernel binds to the lock.

Scenarios that import Transformers run in a fresh interpreter each, like a
user's training script (tests/scripts/tiny.py is the child side); cheap
kernels-only checks run in-process.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import ACTIVATION, CUDA_X86, FA2, UNIVERSAL, LockedProjectFactory, clear_loaded_kernels
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import (
    IntegrityError,
    LockfileError,
    LockfileNotFoundError,
    MissingFilesError,
    NoVariantError,
    UnlockedKernelError,
)
from kernlock.testing.fixtures import advance_branch, rev_parse
from kernlock.testing.hub import TestHub
from scripts.harness import ok, only_locked_files_requested, python, variant_of

# ---------------------------------------------------------------- Transformers attention

FORMS_SCRIPT = """
import warnings, kernlock
applied = kernlock.apply()
out = {}
for form in FORMS:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        net = tiny.model(form)
    out[form] = {**tiny.step_through(net), 'warnings': [str(w.message) for w in caught if 'paged' in str(w.message)]}
tiny.result(forms=out, applied=applied.kernels)
"""


@pytest.mark.slow
def test_every_attn_implementation_form_loads_the_locked_build_after_branches_move(
    hub: TestHub, locked_project: LockedProjectFactory
) -> None:
    project, lock = locked_project([FA2, f"{FA2}@v2", f"paged|{FA2}@v3", f"{FA2}:flash_attn_func", "flash_attention_2"])
    locked = {k.spec: k for k in lock.kernels}
    moved = {branch: advance_branch(hub.repo_path(FA2), branch) for branch in ("v2", "v3", "v4")}
    expected = {
        FA2: locked[FA2],
        f"{FA2}@v2": locked[f"{FA2}@v2"],
        f"{FA2}:flash_attn_func": locked[FA2],
        f"paged|{FA2}@v3": locked[f"{FA2}@v3"],
        "flash_attention_2": locked[FA2],  # no flash-attn package: Transformers falls back to the Hub kernel
    }
    script = f"FORMS = {list(expected)!r}\n{FORMS_SCRIPT}"
    hub.reset_counts()
    cold = ok(python(script, project))["forms"]
    only_locked_files_requested(hub, lock)

    for form, entry in expected.items():
        used = cold[form]["used"]
        assert len(used) == 1, (form, cold[form])  # forward+backward ran through exactly one kernel build
        assert used[0]["commit"] == entry.commit != moved[entry.ref], form
        assert used[0]["variant"] == variant_of(lock, entry), form
        assert "(moved)" not in used[0]["build"], form
    assert cold["flash_attention_2"]["impl"] == FA2
    assert cold[f"paged|{FA2}@v3"]["impl"] == f"{FA2}@v3" and cold[f"paged|{FA2}@v3"]["warnings"]

    hub.reset_counts()  # warm cache: no request at all, and HF_HUB_OFFLINE is not set
    warm = ok(python(script, project))["forms"]
    assert sum(hub.requests.values()) == 0, hub.log
    assert {f: w["used"] for f, w in warm.items()} == {f: c["used"] for f, c in cold.items()}


STRICT_SCRIPT = """
import kernlock
kernlock.apply(**APPLY)
{imports}
pinned = tiny.step_through(tiny.model(FA2 + '@v2'))
try:
    unlocked = tiny.step_through(tiny.model(FA2 + '@v3'))['used']
except Exception as caught:
    unlocked = [type(caught).__name__, str(caught)]
tiny.result(pinned=pinned, unlocked=unlocked)
"""


@pytest.mark.parametrize("before", [True, False], ids=["apply-before-import", "apply-after-import"])
@pytest.mark.slow
def test_apply_before_or_after_importing_transformers(hub: TestHub, locked_project: LockedProjectFactory,
                                                      before: bool) -> None:
    project, lock = locked_project([f"{FA2}@v2"])
    moved = advance_branch(hub.repo_path(FA2), "v2")
    imports = "import kernels, transformers\nfrom kernels import get_kernel"
    script = STRICT_SCRIPT.replace("{imports}", "" if not before else imports)
    if not before:  # Transformers and kernels (and kernels' names bound by `from … import`) come first
        script = imports + "\n" + script
    apply_args = {} if before else {"strict": False}
    proc = python(f"FA2 = {FA2!r}\nAPPLY = {apply_args!r}\n{script}", project)
    result = ok(proc)
    [used] = result["pinned"]["used"]
    assert used["commit"] == lock.kernels[0].commit != moved
    assert used["variant"] == variant_of(lock, lock.kernels[0])
    if before:  # strict: Transformers wraps the error in ValueError; kernlock's message survives
        kind, message = result["unlocked"]
        assert kind == "ValueError"
        assert f"kernel {FA2} (revision v3) is not in {project / 'kernels.lock'}; fix: lock it with `kernlock lock {FA2}@v3`" in message
    else:  # lenient: an unlocked kernel loads as usual (the v3 branch head), with a warning
        [unlocked] = result["unlocked"]
        assert unlocked["commit"] == rev_parse(hub.repo_path(FA2), "v3")
        assert f"kernel {FA2} (revision v3) is not in" in proc.stderr


# ---------------------------------------------------------------- kernels' own entry points

def test_direct_kernels_calls_bind_to_the_lock(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v2"])
    [entry] = lock.kernels
    moved = advance_branch(hub.repo_path(FA2), "v2")
    kernlock.apply(project / "kernels.lock")

    for request in ({"version": 2}, {"revision": "v2"}, {"revision": entry.commit}, {"revision": entry.commit[:12]}):
        clear_loaded_kernels()
        identity = kernels.get_kernel(FA2, **request).KERNEL_IDENTITY
        assert (identity["commit"], identity["variant"]) == (entry.commit, variant_of(lock, entry)), request
    assert moved != entry.commit

    hub.reset_counts()
    clear_loaded_kernels()
    assert kernels.get_kernel(FA2, version=2).KERNEL_IDENTITY["commit"] == entry.commit
    assert kernels.has_kernel(FA2, version=2)
    decisions = kernels.get_kernel_variants(FA2, version=2)
    assert isinstance(decisions[0], kernels.VariantAccepted)
    assert decisions[0].variant.variant_str == variant_of(lock, entry)
    assert {d.variant.variant_str for d in decisions} == set(entry.build_variants)
    assert sum(hub.requests.values()) == 0, hub.log

    for call in (kernels.get_kernel, kernels.has_kernel, kernels.get_kernel_variants):
        with pytest.raises(UnlockedKernelError, match=rf"kernel {FA2} \(version 3\) is not in .*kernlock lock {FA2}"):
            call(FA2, version=3)
    assert sum(hub.requests.values()) == 0, hub.log


def test_lenient_apply_warns_and_loads_unlocked_kernels_as_usual(locked_project: LockedProjectFactory, caplog) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    kernlock.apply(project / "kernels.lock", strict=False)
    with caplog.at_level(logging.WARNING, logger="kernlock"):
        identity = kernels.get_kernel(UNIVERSAL, version=1).KERNEL_IDENTITY
    assert identity["build"] == "universal v1 #1"
    assert f"kernel {UNIVERSAL} (version 1) is not in {project / 'kernels.lock'}" in caplog.text


KERNELIZE_SCRIPT = """
import kernlock
if not EARLY:
    kernlock.apply()
from torch import nn
from kernels import LayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
if EARLY:
    kernlock.apply()

@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, x):
        d = x.shape[-1] // 2
        return nn.functional.silu(x[..., :d]) * x[..., d:]

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act = nn.Linear(8, 16), SiluAndMul()
    def forward(self, x):
        return self.act(self.up(x))

mapping = {"SiluAndMul": {"cpu": LayerRepository(repo_id=REPO, layer_name="SiluAndMul", version=1)}}
torch.manual_seed(0)
reference, x = MLP(), torch.randn(3, 8)
expected = reference(x)
out = {}
for mode in (Mode.INFERENCE, Mode.TRAINING):
    with use_kernel_mapping(mapping):
        net = kernelize(MLP(), device="cpu", mode=mode)
    net.load_state_dict(reference.state_dict())
    module = tiny.kernel_module(REPO)
    calls = module.CALLS["silu_and_mul"]
    y = net(x)
    y.sum().backward()
    torch.testing.assert_close(y, expected)
    out[mode.name] = {**module.KERNEL_IDENTITY, "calls": module.CALLS["silu_and_mul"] - calls}
tiny.result(**out)
"""


@pytest.mark.slow
def test_kernelize_uses_the_locked_layer_kernel_with_no_requests_when_warm(hub: TestHub,
                                                                           locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{ACTIVATION}@v1"])
    [entry] = lock.kernels
    moved = advance_branch(hub.repo_path(ACTIVATION), "v1")
    script = f"REPO = {ACTIVATION!r}\n{KERNELIZE_SCRIPT}"
    hub.reset_counts()
    cold = ok(python("EARLY = False\n" + script, project))  # apply() before kernels is imported
    only_locked_files_requested(hub, lock)
    hub.reset_counts()
    warm = ok(python("EARLY = True\n" + script, project))  # apply() after kernels' layer API is imported
    assert sum(hub.requests.values()) == 0, hub.log
    assert warm == cold
    for mode, used in cold.items():
        assert (used["commit"], used["variant"]) == (entry.commit, variant_of(lock, entry)) and used["commit"] != moved, mode
        assert used["calls"] == 1, mode


# ---------------------------------------------------------------- TRL

SFT_SCRIPT = """
import kernlock
applied = kernlock.apply()
from datasets import Dataset
from trl import SFTConfig, SFTTrainer
tokenizer = tiny.tokenizer(Path('tok'))
model = tiny.model(FA2)
kernel = tiny.kernel_module(FA2)
before = dict(kernel.CALLS)
args = SFTConfig(output_dir='out', max_steps=2, per_device_train_batch_size=2, report_to='none', save_strategy='no',
                 logging_steps=1, max_length=32, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_dict(tiny.texts()), processing_class=tokenizer)
stats = trainer.train()
tiny.result(identity=kernel.KERNEL_IDENTITY, before=before, after=dict(kernel.CALLS), steps=stats.global_step)
"""


@pytest.mark.slow
def test_sft_trainer_trains_through_the_locked_kernel(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    moved = advance_branch(hub.repo_path(FA2), entry.ref)
    result = ok(python(f"from pathlib import Path\nFA2 = {FA2!r}\n{SFT_SCRIPT}", project))
    assert result["steps"] == 2
    assert (result["identity"]["commit"], result["identity"]["variant"]) == (entry.commit, variant_of(lock, entry))
    assert result["identity"]["commit"] != moved
    calls = sum(result["after"].values()) - sum(result["before"].values())
    assert calls >= 2 * 2  # at least one call per layer and step (padded batches go through varlen)


# ---------------------------------------------------------------- failures


def test_no_variant_for_this_environment_fails_inside_apply(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v2"], targets=[CUDA_X86])
    with pytest.raises(NoVariantError) as error:
        kernlock.apply(project / "kernels.lock")
    message = str(error.value)
    here = kernlock.current_target()
    assert f"({here})" in message and CUDA_X86 in message and f"kernlock lock --target {here}" in message
    assert len(message.splitlines()) == 1
    assert kernlock._internal.runtime.apply.active_lock() is None  # nothing was bound


def test_tampered_cached_file_is_caught_even_with_same_size(locked_project: LockedProjectFactory, monkeypatch) -> None:
    project, lock = locked_project([f"{FA2}@v2"])
    [entry] = lock.kernels
    variant = entry.variant_for(lock.targets[0])
    kernlock.apply(project / "kernels.lock")
    kernels.get_kernel(FA2, version=2)
    root = cache.variant_dir(entry, variant.name)
    assert any(name.startswith("stamp-") for name in os.listdir(os.environ["KERNLOCK_CACHE_DIR"]))

    hashed: list[Path] = []
    original = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda path: hashed.append(path) or original(path))  # type: ignore[func-returns-value]  # append: None, then the call
    clear_loaded_kernels()
    kernels.get_kernel(FA2, version=2)  # second warm start: the stamp spares re-hashing
    assert hashed == []

    target = next(f for f in variant.files if f.path.endswith("_ops.so"))
    blob = (root / target.path).resolve()  # cache files are symlinks to blobs
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF
    blob.write_bytes(bytes(data))  # same size, new mtime
    clear_loaded_kernels()
    with pytest.raises(IntegrityError) as error:
        kernels.get_kernel(FA2, version=2)
    message = str(error.value)
    assert f"{variant.name}/{target.path}" in message and target.sha256 in message
    assert hashed and original(blob) in message
    assert "kernlock sync --repair" in message


def test_offline_with_a_cold_cache_says_to_sync(hub: TestHub, locked_project: LockedProjectFactory,
                                                monkeypatch) -> None:
    from huggingface_hub import constants

    project, _ = locked_project([f"{FA2}@v2"])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1 set
    kernlock.apply(project / "kernels.lock")
    hub.reset_counts()
    with pytest.raises(MissingFilesError, match=r"are not in the cache .*run `kernlock sync`"):
        kernels.get_kernel(FA2, version=2)
    assert sum(hub.requests.values()) == 0


def test_missing_and_malformed_lock(locked_project: LockedProjectFactory, tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.delenv("KERNLOCK_LOCKFILE", raising=False)
    monkeypatch.delenv("KERNLOCK_VENDOR_DIR", raising=False)
    with pytest.raises(LockfileNotFoundError, match=rf"looked for {empty / 'kernels.lock'}"):
        kernlock.apply()
    with pytest.raises(LockfileNotFoundError, match="nope.lock does not exist"):
        kernlock.apply(empty / "nope.lock")
    monkeypatch.setenv("KERNLOCK_LOCKFILE", str(empty / "env.lock"))
    with pytest.raises(LockfileNotFoundError, match=r"\$KERNLOCK_LOCKFILE points at .*env.lock"):
        kernlock.apply()
    monkeypatch.delenv("KERNLOCK_LOCKFILE")

    project, _ = locked_project([f"{FA2}@v2"])
    path = project / "kernels.lock"
    path.write_text(path.read_text().replace('commit = "', 'commit = "zz', 1))
    with pytest.raises(LockfileError, match=r"kernel\[0\]\.commit"):
        kernlock.apply(path)
    path.write_text("version = [\n")
    with pytest.raises(LockfileError):
        kernlock.apply(path)
    assert kernlock._internal.runtime.apply.active_lock() is None
