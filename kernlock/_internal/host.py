"""The running machine: its Python, CPU and OS, installed distributions' versions, and its target.

`current_target()` reads Torch's installed metadata and `torch/version.py`
instead of importing Torch, so checks stay fast.
`kernlock._internal.compat.kernels_api.kernels_target()` asks kernels itself (importing Torch) and
is what the loader patch uses.

Imports model (`Target`) and errors; `kernlock._internal.spec` itself reads nothing of the machine.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import platform
import re
from pathlib import Path

from kernlock._internal.spec.target import Target
from kernlock.errors import TargetError

_VERSION_FIELD_RE = re.compile(r"^(cuda|hip|xpu)\s*(?::[^=]*)?=\s*'([^']*)'", re.MULTILINE)


def interpreter(target: Target) -> tuple[str, bool]:
    """The Python `major.minor` and free-threading kernels ranks `target`'s variants for: declared,
    else the running one."""
    return (target.python, target.free_threaded) if target.python else running_python()


def running_python() -> tuple[str, bool]:
    """This interpreter's Python `major.minor` and whether it is free-threaded, as kernels 0.19
    detects them (`sys.version_info`, `sysconfig`'s `Py_GIL_DISABLED`)."""
    import sys
    import sysconfig

    return f"{sys.version_info.major}.{sys.version_info.minor}", bool(
        sysconfig.get_config_var("Py_GIL_DISABLED")
    )


def system_platform() -> tuple[str, str]:
    """CPU and OS the way kernels names them (`x86_64`, `linux`)."""
    cpu = platform.machine()
    os_name = platform.system().lower()
    if os_name == "darwin":
        cpu = "aarch64" if cpu == "arm64" else cpu
    elif os_name == "windows":
        cpu = "x86_64" if cpu == "AMD64" else cpu
    return cpu, os_name


def _torch_version_file() -> Path | None:
    spec = importlib.machinery.PathFinder.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "version.py"


def _backend_from_version_file(path: Path | None, os_name: str) -> str:
    fields: dict[str, str] = {}
    if path is not None and path.is_file():
        fields = dict(_VERSION_FIELD_RE.findall(path.read_text(encoding="utf-8")))
    if fields.get("cuda"):
        major, minor = fields["cuda"].split(".")[:2]
        return f"cu{major}{minor}"
    if fields.get("hip"):
        major, minor = fields["hip"].split("-")[0].split(".")[:2]
        return f"rocm{major}{minor}"
    if fields.get("xpu"):
        xpu = fields["xpu"]
        return f"xpu{xpu[0:4]}{xpu[5:6]}"
    if os_name == "darwin":
        return "metal"
    return "cpu"


@functools.cache  # asked for the same few distributions several times per apply()
def installed_version(distribution: str) -> str | None:
    """A distribution's installed version without importing it (its import name must match).

    Read from the `.dist-info` folder beside the package when there is exactly one
    (cheap), else from `importlib.metadata` (about 25 ms to import; an editable install, say).
    Cached for the process, like the installed Transformers
    (`compat.transformers.installed_transformers`).
    """
    # sys.path only: import hooks (kernlock's own start-up hook among them) must not fire for a
    # version lookup
    spec = importlib.machinery.PathFinder.find_spec(distribution)
    if spec is not None and spec.submodule_search_locations:
        folder = os.path.dirname(next(iter(spec.submodule_search_locations)))
        prefix, suffix = f"{distribution}-", ".dist-info"
        found = [
            name for name in os.listdir(folder) if name.startswith(prefix) and name.endswith(suffix)
        ]
        if len(found) == 1:  # a name test, not Path.glob: a glob compiles a pattern per call
            return found[0][len(prefix) : -len(suffix)]
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine_target() -> Target:
    """This machine as kernlock's readers see it: `$KERNLOCK_TARGET` when set, else
    `current_target()` (raises `TargetError` when neither says)."""
    from kernlock._internal.settings import TARGET_ENV, text
    from kernlock._internal.spec.target import parse_target

    simulated = text(TARGET_ENV)
    return parse_target(simulated) if simulated else current_target()


def current_target() -> Target:
    """The running environment as a target, without importing Torch.

    Raises `TargetError` when Torch is not installed.
    """
    version = installed_version("torch")
    if version is None:
        raise TargetError(
            "torch is not installed, so there is no current environment",
            fix="pass --target explicitly (or declare [tool.kernlock] targets)",
        )
    numbers = re.match(r"(\d+)\.(\d+)", version)
    if not numbers:
        raise TargetError(
            f"cannot read the installed torch version {version!r}",
            fix="pass --target explicitly (or declare [tool.kernlock] targets)",
        )
    cpu, os_name = system_platform()
    torch = (int(numbers.group(1)), int(numbers.group(2)))
    # Torch wheels switched to the C++11 ABI in 2.7; earlier PyPI wheels used the old ABI.
    cxx11 = (torch >= (2, 7)) if os_name == "linux" else None
    backend = _backend_from_version_file(_torch_version_file(), os_name)
    return Target(torch=torch, backend=backend, cpu=cpu, os=os_name, cxx11_abi=cxx11)
