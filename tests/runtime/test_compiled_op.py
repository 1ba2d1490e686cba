"""A compiled kernel in kernel-builder's real layout: its C++ op loads through apply(), and a tampered library never loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import RELU, LockedProjectFactory
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import LockfileError
from scripts.harness import ok, python, variant_of

LIBRARY = "_relu_0f3c2a1.abi3.so"

LOAD_SCRIPT = """
import kernels, kernlock
kernlock.apply()
maps = lambda: [line.split()[-1] for line in open('/proc/self/maps') if '/' in line]
try:
    kernel = kernels.get_kernel(RELU, version=1)
except Exception as caught:
    tiny.result(error=[type(caught).__name__, str(caught)], mapped=maps(), imported=[m for m in sys.modules if '_relu_' in m])
    raise SystemExit(0)
x = torch.tensor([-2.0, -0.5, 0.0, 1.5, 3.0])
tiny.result(out=kernel.relu(x).tolist(), through_torch_ops=getattr(torch.ops, OPS).relu(x).tolist(), op=kernel.OP_NAME,
            identity=kernel.KERNEL_IDENTITY, mapped=maps())
"""


def run_load(project: Path) -> dict:
    return ok(python(f"RELU = {RELU!r}\nOPS = {LIBRARY.split('.')[0]!r}\n{LOAD_SCRIPT}", project))


@pytest.mark.slow
def test_compiled_op_kernel_in_kernel_builder_layout_loads_through_apply(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{RELU}@v1"])
    [entry] = lock.kernels
    variant = entry.variant_for(lock.targets[0])
    assert sorted(f.path for f in variant.files) == [
        "__init__.py", "_identity.py", "_ops.py", LIBRARY, "metadata.json", "metadata.json.sigstore", "relu/__init__.py",
    ]
    assert variant.signed and "signed = true" in (project / "kernels.lock").read_text()

    result = run_load(project)
    assert result["out"] == result["through_torch_ops"] == [0.0, 0.0, 0.0, 1.5, 3.0]
    assert result["op"] == "_relu_0f3c2a1::relu"
    assert (result["identity"]["commit"], result["identity"]["variant"]) == (entry.commit, variant_of(lock, entry))
    # The library that was dlopened is the Hub cache blob named by the locked sha256 of the .so.
    library = next(f for f in variant.files if f.path == LIBRARY)
    assert any(Path(path).name == library.sha256 for path in result["mapped"]), result["mapped"]


@pytest.mark.slow
def test_tampered_library_is_refused_before_dlopen(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{RELU}@v1"])
    [entry] = lock.kernels
    variant = entry.variant_for(lock.targets[0])
    library = next(f for f in variant.files if f.path == LIBRARY)
    run_load(project)  # warm cache, verified and stamped
    blob = (cache.variant_dir(entry, variant.name) / LIBRARY).resolve()
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the hash tells
    blob.write_bytes(bytes(data))

    result = run_load(project)
    kind, message = result["error"]
    assert kind == "IntegrityError" and f"{variant.name}/{LIBRARY}" in message and library.sha256 in message
    assert not any(Path(path).name == library.sha256 for path in result["mapped"])  # never mapped into the process
    assert result["imported"] == []


def test_signed_must_agree_with_the_locked_files(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{RELU}@v1"])
    text = (project / "kernels.lock").read_text()
    unsigned = project / "unsigned.lock"
    unsigned.write_text(text.replace("signed = true\n", ""))
    with pytest.raises(LockfileError, match=r"signed: says not signed, but the files include metadata.json.sigstore"):
        load_lockfile(unsigned)
