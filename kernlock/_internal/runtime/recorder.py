"""The recording loader of `kernlock lock --record`: every kernel request a process makes, one JSON
line each.

With `KERNLOCK_RECORD=<file>` the start-up hook (`_startup/sitecustomize.py`) calls `arm()`. The
first import of `kernels` then wraps its loaders: `get_kernel`, `install_kernel`, and the `load` of
`LayerRepository` and `FuncRepository` (what `kernelize` calls, with the mode and device
`kernelize` was given). Each wrapper appends one `Request` to the file and calls kernels' own
function: kernels load from the Hub exactly as they would without kernlock, no lock is applied.
Processes of one command (launchers, ranks) append to the same file, one `write` per line.
`read_requests` reads it back for `kernlock lock`.
"""

from __future__ import annotations

import json
import os
import sys
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from kernlock._internal.spec.kernel_spec import parse_spec
from kernlock.errors import SpecError

TYPE_CHECKING = False  # not typing's: the start-up hook imports this module
if TYPE_CHECKING:
    from collections.abc import Callable

# the kernelize call (mode, device) a layer load happens in; set while a repository loads, so that
# its inner `get_kernel` is not recorded twice
_kernelizing: ContextVar[tuple[str | None, str | None] | None] = ContextVar(
    "kernlock_kernelizing", default=None
)
_inside: ContextVar[bool] = ContextVar("kernlock_recording", default=False)


@dataclass(frozen=True)
class Request:
    """One kernel request: the repo and its version or revision, the function that asked (`via`),
    the layer or function name it wanted, and the device and mode when known."""

    repo: str
    version: int | None = None
    revision: str | None = None
    via: str = "get_kernel"
    layer: str | None = None
    device: str | None = None
    mode: str | None = None

    @property
    def spec(self) -> str:
        """The spec that locks it: `org/repo@v1`, `org/repo@<revision>`, or `org/repo`."""
        if self.version is not None:
            return f"{self.repo}@v{self.version}"
        if self.revision is not None:
            return f"{self.repo}@{self.revision}"
        return self.repo


# ---------------------------------------------------------------- in the recorded process


def arm(path: str) -> None:
    """Record every kernel request of this process into `path` (now, or when `kernels` is first
    imported)."""
    module = sys.modules.get("kernels")
    if module is not None:
        patch(module, path)
    elif not any(isinstance(finder, _RecordOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RecordOnImport(path))


class _RecordOnImport:
    """A meta-path finder that wraps kernels' loaders once the `kernels` package has run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> Any:
        if fullname != "kernels" or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module  # type: ignore[union-attr]
        record_path = self.path

        def exec_module(module: ModuleType) -> None:
            original(module)
            patch(module, record_path)

        loader.exec_module = exec_module  # type: ignore[union-attr]
        return spec


def patch(kernels: ModuleType, path: str) -> None:
    """Wrap the loaders of the imported `kernels` package so that each request is appended to
    `path`."""
    from kernlock._internal.compat.kernels_patch import replace_function

    if getattr(kernels, "_kernlock_recording", None) == path:
        return
    kernels._kernlock_recording = path  # type: ignore[attr-defined]

    def write(request: Request) -> None:
        line = json.dumps({k: v for k, v in asdict(request).items() if v is not None}) + "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as error:
            sys.stderr.write(
                f"kernlock: warning: cannot record a kernel request in {path}: {error}\n"
            )

    def loader(via: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(repo_id: str, *args: Any, **kwargs: Any) -> Any:
                if _inside.get():
                    return original(repo_id, *args, **kwargs)
                backend = kwargs.get("backend")
                write(
                    Request(
                        repo=str(repo_id),
                        version=kwargs.get("version"),
                        revision=kwargs.get("revision"),
                        via=via,
                        device=str(backend) if backend is not None else None,
                    )
                )
                token = _inside.set(True)
                try:
                    return original(repo_id, *args, **kwargs)
                finally:
                    _inside.reset(token)

            return recorded

        return make

    for name in ("get_kernel", "install_kernel"):
        function = getattr(kernels, name, None)
        if function is not None and function.__module__ in sys.modules:
            replace_function(sys.modules[function.__module__], name, loader(name))
    for cls_name, attribute in (("LayerRepository", "layer_name"), ("FuncRepository", "func_name")):
        cls = getattr(kernels, cls_name, None)
        if cls is not None:
            cls.load = _recorded_load(cls.load, f"{cls_name}.load", attribute, write)
    layers = getattr(kernels, "LayerRepository", None)
    layer_module = sys.modules.get(getattr(layers, "__module__", ""))
    if layer_module is not None and hasattr(layer_module, "kernelize_layer"):
        replace_function(layer_module, "kernelize_layer", _in_kernelize)


def _recorded_load(
    original: Callable[..., Any], via: str, attribute: str, write: Callable[[Request], None]
) -> Callable[..., Any]:
    """A repository's `load`, recording the repository (and suppressing its inner `get_kernel`)."""

    def load(self: Any) -> Any:
        if _inside.get():
            return original(self)
        device, mode = _kernelizing.get() or (None, None)
        write(
            Request(
                repo=str(getattr(self, "_repo_id", "")),
                version=getattr(self, "_version", None),
                revision=getattr(self, "_revision", None),
                via=via,
                layer=getattr(self, attribute, None),
                device=device,
                mode=mode,
            )
        )
        token = _inside.set(True)
        try:
            return original(self)
        finally:
            _inside.reset(token)

    load.__wrapped__ = original  # type: ignore[attr-defined]
    return load


def _in_kernelize(original: Callable[..., Any]) -> Callable[..., Any]:
    """kernels' `kernelize_layer`, telling the loads inside it their device and mode."""

    def kernelize_layer(module: Any, *args: Any, **kwargs: Any) -> Any:
        mode, device = kwargs.get("mode"), kwargs.get("device_type")
        mode_name = getattr(mode, "name", None) or (str(mode) if mode is not None else None)
        token = _kernelizing.set(
            (
                str(getattr(device, "type", device)) if device is not None else None,
                mode_name.lower() if mode_name else None,
            )
        )
        try:
            return original(module, *args, **kwargs)
        finally:
            _kernelizing.reset(token)

    return kernelize_layer


# ---------------------------------------------------------------- in `kernlock lock`


def read_requests(path: str | os.PathLike[str]) -> tuple[list[Request], list[str]]:
    """The requests recorded in `path` (none when it does not exist) and a warning for each line
    that names no valid spec."""
    requests: list[Request] = []
    warnings: list[str] = []
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except FileNotFoundError:
        return requests, warnings
    for line in filter(None, lines):
        try:
            data = json.loads(line)
            request = Request(**data)
            parse_spec(request.spec)
        except (ValueError, TypeError, SpecError) as error:
            warnings.append(f"a recorded kernel request is not lockable and was skipped: {error}")
            continue
        requests.append(request)
    return requests, warnings
