"""Targets: the environments a lock must cover, and detection of the running one.

Target grammar (kernels' own vocabulary, with a dotted Torch version)::

    torch<major>.<minor>[-cxx11|-cxx98]-<backend>-<cpu>-<os>[-tvm-ffi<major>.<minor>][-macos<version>][-cp<major><minor>[t]]

e.g. `torch2.13-cxx11-cpu-x86_64-linux`, `torch2.9-cxx11-cu128-aarch64-linux`,
`torch2.11-cxx11-cu130-x86_64-linux`, `torch2.8-rocm63-x86_64-linux`,
`torch2.9-metal-aarch64-darwin`. Backends are kernels' backend names: `cpu`,
`cu<major><minor>`, `rocm<major><minor>`, `xpu<version>`, `metal`, `cann<...>`,
`neuron`, `tpu`. On Linux the ABI tag defaults to `cxx11` when omitted (every
Torch wheel since 2.7 uses it); on other systems it is absent. `-tvm-ffi0.1`
declares an environment with tvm-ffi 0.1 installed (so kernels' tvm-ffi builds
qualify); `-macos15.4` a macOS release (without it, a Darwin target stands for a
macOS new enough for kernels' Metal builds). Detection leaves both unset.
`-cp311` declares the Python version (wheel-tag spelling; `-cp315t` a free-threaded
one), which kernels 0.19 ranks new-style variants by (`cpython-3.9-abi3`, …); a
target without it stands for the running interpreter's version and free-threading
(`running_python()`, detected as kernels detects it), and detection leaves it unset.

`current_target()` reads Torch's installed metadata and `torch/version.py`
instead of importing Torch, so checks stay fast. `kernlock._internal.compat.kernels_api.kernels_target()`
asks kernels itself (importing Torch) and is what the loader patch uses.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from kernlock.errors import TargetError

# A pattern, compiled at first use (`re` caches it; `parse_target` caches its results): importing compiles nothing.
_TARGET_PATTERN = (
    r"torch(?P<major>\d+)\.(?P<minor>\d+)"
    r"(?:-(?P<abi>cxx11|cxx98))?"
    r"-(?P<backend>cpu|metal|neuron|tpu|cu\d{2,4}|rocm\d{2,4}|xpu\d{2,8}|cann\d{2,4})"
    r"-(?P<cpu>[a-z0-9_]+)-(?P<os>[a-z]+)"
    r"(?:-tvm-ffi(?P<tvm_ffi>\d+\.\d+))?"
    r"(?:-macos(?P<macos>\d+(?:\.\d+)?))?"
    r"(?:-cp(?P<py_major>\d)(?P<py_minor>\d+)(?P<py_t>t)?)?"
)
_VERSION_FIELD_RE = re.compile(r"^(cuda|hip|xpu)\s*(?::[^=]*)?=\s*'([^']*)'", re.MULTILINE)


@functools.total_ordering  # ordered by the fields in order; cheaper to build than dataclass(order=True)'s 4 methods
@dataclass(frozen=True)
class Target:
    """One environment: Torch version and ABI, compute backend, CPU and OS (and tvm-ffi, macOS versions)."""

    torch: tuple[int, int]
    backend: str
    cpu: str
    os: str
    cxx11_abi: bool | None = None
    tvm_ffi: str | None = None  # `major.minor` of an installed tvm-ffi
    macos: str | None = None  # macOS release of a Darwin target
    python: str | None = None  # `major.minor` of the Python a target declares; None: the running interpreter's
    free_threaded: bool = False  # a free-threaded Python (only with `python`)

    def __str__(self) -> str:
        abi = "" if self.cxx11_abi is None else ("-cxx11" if self.cxx11_abi else "-cxx98")
        extra = (f"-tvm-ffi{self.tvm_ffi}" if self.tvm_ffi else "") + (f"-macos{self.macos}" if self.macos else "")
        if self.python:
            extra += f"-cp{self.python.replace('.', '', 1)}{'t' if self.free_threaded else ''}"
        return f"torch{self.torch[0]}.{self.torch[1]}{abi}-{self.backend}-{self.cpu}-{self.os}{extra}"

    def __lt__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() < other._fields()

    def _fields(self) -> tuple:
        # An unset field sorts before a set one (None and a value never meet in a comparison).
        return tuple((False,) if (value := getattr(self, name)) is None else (True, value)
                     for name in self.__dataclass_fields__)

    @property
    def interpreter(self) -> tuple[str, bool]:
        """The Python `major.minor` and free-threading kernels ranks variants for: declared, else the running one."""
        return (self.python, self.free_threaded) if self.python else running_python()

    @property
    def torch_version(self) -> str:
        """Torch `major.minor`, e.g. `2.13`."""
        return f"{self.torch[0]}.{self.torch[1]}"


@functools.lru_cache(maxsize=1024)  # a lock repeats a few targets many times
def parse_target(text: str) -> Target:
    """Parse a target string; raise `TargetError` with the grammar on failure."""
    match = re.fullmatch(_TARGET_PATTERN, text.strip())
    if not match:
        raise TargetError(
            f"invalid target {text!r}: expected torch<major>.<minor>[-cxx11|-cxx98]-<backend>-<cpu>-<os>"
            "[-tvm-ffi<major>.<minor>][-macos<version>][-cp<major><minor>[t]], "
            "e.g. torch2.13-cxx11-cpu-x86_64-linux or torch2.9-cxx11-cu128-x86_64-linux "
            "(with a Python: torch2.13-cxx11-cpu-x86_64-linux-cp311)"
        )
    python = f"{match['py_major']}.{int(match['py_minor'])}" if match["py_major"] else None
    if match["py_t"] and (python is None or (int(match["py_major"]), int(match["py_minor"])) < (3, 13)):
        raise TargetError(f"invalid target {text!r}: free-threaded Python starts at 3.13 (cp313t); "
                          "drop the `t` or name 3.13 or later")
    os_name = match["os"]
    abi = match["abi"]
    cxx11 = None if os_name != "linux" else abi != "cxx98"
    return Target(
        torch=(int(match["major"]), int(match["minor"])),
        backend=match["backend"],
        cpu=match["cpu"],
        os=os_name,
        cxx11_abi=cxx11,
        tvm_ffi=match["tvm_ffi"],
        macos=match["macos"],
        python=python,
        free_threaded=bool(match["py_t"]),
    )


def running_python() -> tuple[str, bool]:
    """This interpreter's Python `major.minor` and whether it is free-threaded, as kernels 0.19 detects them
    (`sys.version_info`, `sysconfig`'s `Py_GIL_DISABLED`)."""
    import sys
    import sysconfig

    return f"{sys.version_info.major}.{sys.version_info.minor}", bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


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


@functools.lru_cache(maxsize=None)  # asked for the same few distributions several times per apply()
def installed_version(distribution: str) -> str | None:
    """A distribution's installed version without importing it (its import name must match).

    Read from the `.dist-info` folder beside the package when there is exactly one
    (cheap), else from `importlib.metadata` (about 25 ms to import; an editable install, say). Cached for the
    process, like the installed Transformers (`compat.transformers.installed_transformers`).
    """
    # sys.path only: import hooks (kernlock's own start-up hook among them) must not fire for a version lookup
    spec = importlib.machinery.PathFinder.find_spec(distribution)
    if spec is not None and spec.submodule_search_locations:
        folder = os.path.dirname(next(iter(spec.submodule_search_locations)))
        prefix, suffix = f"{distribution}-", ".dist-info"
        found = [name for name in os.listdir(folder) if name.startswith(prefix) and name.endswith(suffix)]
        if len(found) == 1:  # a name test, not Path.glob: a glob compiles a pattern per call
            return found[0][len(prefix):-len(suffix)]
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def current_target() -> Target:
    """The running environment as a target, without importing Torch.

    Raises `TargetError` when Torch is not installed.
    """
    version = installed_version("torch")
    if version is None:
        raise TargetError(
            "torch is not installed, so there is no current environment; pass --target explicitly"
        )
    numbers = re.match(r"(\d+)\.(\d+)", version)
    if not numbers:
        raise TargetError(f"cannot read the installed torch version {version!r}; pass --target explicitly")
    cpu, os_name = system_platform()
    torch = (int(numbers.group(1)), int(numbers.group(2)))
    # Torch wheels switched to the C++11 ABI in 2.7; earlier PyPI wheels used the old ABI.
    cxx11 = (torch >= (2, 7)) if os_name == "linux" else None
    backend = _backend_from_version_file(_torch_version_file(), os_name)
    return Target(torch=torch, backend=backend, cpu=cpu, os=os_name, cxx11_abi=cxx11)

