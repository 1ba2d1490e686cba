"""Every kernels entry point goes through the lock under `kernlock.apply()`; strict mode refuses what is not locked.

kernels-only entry points run in-process against the test Hub; Transformers'
`use_kernels=True` runs in a fresh interpreter.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import ACTIVATION, UNIVERSAL, clear_loaded_kernels
from kernlock._internal.fetch import download
from kernlock.errors import LocalKernelError, UnlockedKernelError
from scripts.harness import ok, python, variant_of

UNLOCKED = rf"kernel {UNIVERSAL} \(.*\) is not in .*kernlock lock {UNIVERSAL}"




def _bound(module, lock, entry) -> None:
    identity = module.KERNEL_IDENTITY
    assert (identity["commit"], identity["variant"]) == (entry.commit, variant_of(lock, entry)), identity


def test_load_kernel_and_get_locked_kernel_read_the_applied_lock(locked) -> None:
    project, lock, entry = locked
    lockfile = project / "kernels.lock"
    with pytest.raises(ValueError):  # without kernlock, kernels cannot read kernlock's TOML lock
        kernels.get_locked_kernel(ACTIVATION, lockfile=lockfile)
    kernlock.apply(lockfile)
    _bound(kernels.get_locked_kernel(ACTIVATION, lockfile=lockfile), lock, entry)
    clear_loaded_kernels()
    _bound(kernels.load_kernel(ACTIVATION, lockfile=lockfile), lock, entry)
    clear_loaded_kernels()
    _bound(kernels.load_kernel(ACTIVATION, lockfile=None), lock, entry)  # package metadata: served by the lock
    for call in (kernels.get_locked_kernel, kernels.load_kernel):
        with pytest.raises(UnlockedKernelError, match=UNLOCKED):
            call(UNIVERSAL, lockfile=lockfile)


def test_layer_and_function_repositories_bind_or_refuse(locked) -> None:
    project, lock, entry = locked
    lockfile = project / "kernels.lock"
    kernlock.apply(lockfile)
    repositories = [
        kernels.LayerRepository(ACTIVATION, layer_name="SiluAndMul", version=1),
        kernels.LockedLayerRepository(ACTIVATION, lockfile=lockfile, layer_name="SiluAndMul"),
        kernels.FuncRepository(ACTIVATION, func_name="silu_and_mul", version=1),
        kernels.LockedFuncRepository(ACTIVATION, lockfile=lockfile, func_name="silu_and_mul"),
    ]
    for repository in repositories:
        clear_loaded_kernels()
        repository.load()
        _bound(sys.modules[kernels.get_loaded_kernels()[-1].metadata.id], lock, entry)

    with pytest.raises(UnlockedKernelError, match=UNLOCKED):
        kernels.LayerRepository(UNIVERSAL, layer_name="X", version=1).load()
    with pytest.raises(UnlockedKernelError, match=UNLOCKED):
        kernels.FuncRepository(UNIVERSAL, func_name="add", version=1).load()
    with pytest.raises(UnlockedKernelError, match=UNLOCKED):
        kernels.LockedLayerRepository(UNIVERSAL, lockfile=lockfile, layer_name="X")
    with pytest.raises(UnlockedKernelError, match=UNLOCKED):
        kernels.LockedFuncRepository(UNIVERSAL, lockfile=lockfile, func_name="add")


def test_kernelize_refuses_an_unlocked_layer_repository(locked) -> None:
    from torch import nn

    project, _, _ = locked
    kernlock.apply(project / "kernels.lock")

    @kernels.use_kernel_forward_from_hub("Add")
    class Add(nn.Module):
        def forward(self, x):
            return x + x

    mapping = {"Add": {"cpu": kernels.LayerRepository(UNIVERSAL, layer_name="Add", version=1)}}
    with kernels.use_kernel_mapping(mapping), pytest.raises(UnlockedKernelError, match=UNLOCKED):
        kernels.kernelize(nn.Sequential(Add()), device="cpu", mode=kernels.Mode.INFERENCE)


def _local_copy(lock, entry, tmp_path: Path) -> Path:
    """A local build of the locked kernel, as a kernel developer has it (`<dir>/build/<variant>`)."""
    variant = entry.variant_for(lock.targets[0])
    source = download.ensure_variant(entry, variant)
    local = tmp_path / "local-activation"
    shutil.copytree(source, local / "build" / variant.name)
    return local


def test_local_kernels_refused_under_strict_and_loud_when_allowed(locked, tmp_path: Path, monkeypatch, caplog) -> None:
    project, lock, entry = locked
    lockfile = project / "kernels.lock"
    local = _local_copy(lock, entry, tmp_path)
    monkeypatch.setenv("LOCAL_KERNELS", f"{ACTIVATION}={local}")
    with pytest.raises(LocalKernelError, match=rf"LOCAL_KERNELS overrides {ACTIVATION}={local}.*KERNLOCK_ALLOW_LOCAL=1"):
        kernlock.apply(lockfile)

    monkeypatch.setenv("KERNLOCK_ALLOW_LOCAL", "1")
    with caplog.at_level(logging.WARNING, logger="kernlock"):
        kernlock.apply(lockfile)
    assert f"LOCAL_KERNELS: loading {ACTIVATION} from {local} instead of the locked {entry.commit[:12]}" in caplog.text
    for load in (lambda: kernels.get_kernel(ACTIVATION, version=1), lambda: kernels.load_kernel(ACTIVATION, lockfile=lockfile)):
        clear_loaded_kernels()
        identity = load().KERNEL_IDENTITY
        assert identity["commit"] is None and identity["variant"] == variant_of(lock, entry)  # the local build
        assert Path(sys.modules[kernels.get_loaded_kernels()[-1].metadata.id].__file__).is_relative_to(local)

    monkeypatch.delenv("KERNLOCK_ALLOW_LOCAL")  # lenient: honoured with the same warning, no opt-in needed
    kernlock.apply(lockfile, strict=False)
    clear_loaded_kernels()
    assert kernels.get_kernel(ACTIVATION, version=1).KERNEL_IDENTITY["commit"] is None


def test_verify_reports_local_kernels(locked, monkeypatch) -> None:
    project, _, _ = locked
    monkeypatch.setenv("LOCAL_KERNELS", f"{ACTIVATION}=/src/activation")
    doctor = kernlock.verify(project).check("doctor")
    assert not doctor.ok
    [problem] = doctor.problems
    assert problem.message == f"LOCAL_KERNELS overrides {ACTIVATION} with /src/activation (locked): strict kernlock.apply() refuses it"
    assert problem.fix == "set KERNLOCK_ALLOW_LOCAL=1 to allow it, or unset LOCAL_KERNELS"
    monkeypatch.setenv("KERNLOCK_ALLOW_LOCAL", "1")  # the fix it names
    doctor = kernlock.verify(project).check("doctor")
    assert doctor.ok and any("loads it unchecked, with a warning" in note for note in doctor.notes)
    monkeypatch.setenv("LOCAL_KERNELS", "no-equals-sign")
    [problem] = kernlock.verify(project).check("doctor").problems
    assert "LOCAL_KERNELS is malformed" in problem.message


def test_get_local_kernel_is_a_local_kernel_too(locked, tmp_path: Path, monkeypatch, caplog) -> None:
    project, lock, entry = locked
    local = _local_copy(lock, entry, tmp_path)
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(LocalKernelError, match=rf"get_local_kernel loads {local} from {local} \(not in the lock\)"):
        kernels.get_local_kernel(local)
    monkeypatch.setenv("KERNLOCK_ALLOW_LOCAL", "1")
    with caplog.at_level(logging.WARNING, logger="kernlock"):
        identity = kernels.get_local_kernel(local).KERNEL_IDENTITY
    assert identity["commit"] is None and f"get_local_kernel: loading {local} from {local}" in caplog.text


USE_KERNELS_SCRIPT = """
import kernlock
kernlock.apply()
from kernels import LayerRepository, register_kernel_mapping
from transformers import AutoModelForCausalLM
tiny.model('sdpa').save_pretrained('saved')
register_kernel_mapping({"RMSNorm": {"cpu": LayerRepository(repo_id=REPO, layer_name="SiluAndMul", version=1)}})
AutoModelForCausalLM.from_pretrained('saved', use_kernels=True)
bound = tiny.kernel_module(REPO).KERNEL_IDENTITY
register_kernel_mapping({"RMSNorm": {"cpu": LayerRepository(repo_id=UNLOCKED, layer_name="SiluAndMul", version=1)}})
try:
    AutoModelForCausalLM.from_pretrained('saved', use_kernels=True)
    refused = None
except Exception as error:
    refused = [type(error).__name__, str(error)]
tiny.result(bound=bound, refused=refused)
"""


@pytest.mark.slow
def test_transformers_use_kernels_binds_to_the_lock_and_strict_refuses_unlocked(locked) -> None:
    project, lock, entry = locked
    script = f"REPO = {ACTIVATION!r}\nUNLOCKED = {UNIVERSAL!r}\n{USE_KERNELS_SCRIPT}"
    result = ok(python(script, project))
    assert (result["bound"]["commit"], result["bound"]["variant"]) == (entry.commit, variant_of(lock, entry))
    kind, message = result["refused"]
    assert kind == "UnlockedKernelError" and f"kernel {UNIVERSAL} (version 1) is not in" in message, result

