"""Targets: the environments a lock must cover.

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
(`kernlock._internal.host.running_python()`, detected as kernels detects it), and detection leaves
it unset.

Detecting the running environment is `kernlock._internal.host` (`current_target()`): this module
only parses and models targets, and reads nothing of the machine.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kernlock.errors import TargetError

# A pattern, compiled at first use (`re` caches it; `parse_target` caches its results): importing
# compiles nothing.
_TARGET_PATTERN = (
    r"torch(?P<major>\d+)\.(?P<minor>\d+)"
    r"(?:-(?P<abi>cxx11|cxx98))?"
    r"-(?P<backend>cpu|metal|neuron|tpu|cu\d{2,4}|rocm\d{2,4}|xpu\d{2,8}|cann\d{2,4})"
    r"-(?P<cpu>[a-z0-9_]+)-(?P<os>[a-z]+)"
    r"(?:-tvm-ffi(?P<tvm_ffi>\d+\.\d+))?"
    r"(?:-macos(?P<macos>\d+(?:\.\d+)?))?"
    r"(?:-cp(?P<py_major>\d)(?P<py_minor>\d+)(?P<py_t>t)?)?"
)


# ordered by the fields in order; cheaper to build than dataclass(order=True)'s 4 methods
@functools.total_ordering
@dataclass(frozen=True)
class Target:
    """One environment: Torch version and ABI, compute backend, CPU and OS (and tvm-ffi, macOS
    versions)."""

    torch: tuple[int, int]
    backend: str
    cpu: str
    os: str
    cxx11_abi: bool | None = None
    tvm_ffi: str | None = None  # `major.minor` of an installed tvm-ffi
    macos: str | None = None  # macOS release of a Darwin target
    # `major.minor` of the Python a target declares; None: the running interpreter's
    python: str | None = None
    free_threaded: bool = False  # a free-threaded Python (only with `python`)

    def __str__(self) -> str:
        abi = "" if self.cxx11_abi is None else ("-cxx11" if self.cxx11_abi else "-cxx98")
        extra = (f"-tvm-ffi{self.tvm_ffi}" if self.tvm_ffi else "") + (
            f"-macos{self.macos}" if self.macos else ""
        )
        if self.python:
            extra += f"-cp{self.python.replace('.', '', 1)}{'t' if self.free_threaded else ''}"
        return (
            f"torch{self.torch[0]}.{self.torch[1]}{abi}-{self.backend}-{self.cpu}-{self.os}{extra}"
        )

    def __lt__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() < other._fields()

    def _fields(self) -> tuple:
        # An unset field sorts before a set one (None and a value never meet in a comparison).
        return tuple(
            (False,) if (value := getattr(self, name)) is None else (True, value)
            for name in self.__dataclass_fields__
        )

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
            f"invalid target {text!r}: expected "
            "torch<major>.<minor>[-cxx11|-cxx98]-<backend>-<cpu>-<os>[-tvm-ffi<major>.<minor>][-macos<version>][-cp<major><minor>[t]]",
            fix="write it in that form, e.g. torch2.13-cxx11-cpu-x86_64-linux or "
            "torch2.9-cxx11-cu128-x86_64-linux (with a Python: "
            "torch2.13-cxx11-cpu-x86_64-linux-cp311)",
        )
    python = f"{match['py_major']}.{int(match['py_minor'])}" if match["py_major"] else None
    if match["py_t"] and (
        python is None or (int(match["py_major"]), int(match["py_minor"])) < (3, 13)
    ):
        raise TargetError(
            f"invalid target {text!r}: free-threaded Python starts at 3.13 (cp313t)",
            fix="drop the `t` or name 3.13 or later",
        )
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
