"""`kernlock run` puts this directory on PYTHONPATH: arm kernlock's start-up hook, then chain to any
other sitecustomize.

With `KERNLOCK_APPLY=1` the lock is applied when `kernels` or `transformers` is
first imported (`kernlock._internal.runtime.autoapply`); a process that imports neither pays
almost nothing. A Python that cannot import kernlock (another environment) stops
at that import instead, with one line naming the fix: it never loads a kernel
without the lock. With `KERNLOCK_RECORD=<file>` (`kernlock lock --record`), every kernel
request is appended to that file instead (`kernlock._internal.runtime.recorder`), no lock
applied. Without either, this file does nothing but the chaining.

The chain is idempotent: it runs the first `sitecustomize.py` below this one that
is not a kernlock start-up file (another environment's kernlock start-up dir on
`PYTHONPATH` is skipped, not chained back and forth), and at most once per process.
"""

# kernlock-startup-hook (this marker names the file to other kernlock start-up dirs' chains)

import os
import sys


class _Refuse:
    """A meta-path finder for a process that cannot apply the lock: the first import of kernels or
    transformers exits."""

    def __init__(self, problem: str) -> None:
        self.problem = problem

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname in ("kernels", "transformers"):
            sys.stderr.write(f"kernlock: error: {self.problem.format(module=fullname)}\n")
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(1)  # inside an import: an exception could be swallowed by `try: import …`
        return None


def _install_fix() -> str:
    """How to get kernlock into this interpreter (kernlock is not on PyPI: a checkout or a wheel),
    or the one `kernlock run` itself ran in (`$KERNLOCK_RUN_PYTHON`, read raw:
    kernlock._internal.settings cannot be imported here)."""
    launcher = os.environ.get("KERNLOCK_RUN_PYTHON", "")
    install = (
        f"install kernlock into {sys.executable} from its checkout or wheel: `{sys.executable} -m "
        "pip install <kernlock checkout or .whl>`"
    )
    if launcher and launcher != sys.executable:
        return f"run the command with {launcher} (the Python kernlock runs in), or {install}"
    return install


def _arm() -> None:
    """Arm the hook when `$KERNLOCK_APPLY` asks for it, read by kernlock's one boolean grammar
    (`kernlock._internal.settings`).

    Any value set where kernlock cannot be imported, or one the grammar refuses, fails closed: the
    first import of kernels or transformers stops with one line, and nothing loads without the lock.
    """
    try:
        from kernlock._internal.settings import apply_requested
    except ImportError as error:
        sys.meta_path.insert(
            0,
            _Refuse(
                f"kernlock run applies the lock in every Python process, but {sys.executable} "
                f"cannot import kernlock ({error}), so the import of {{module}} is stopped: it "
                f"would load Hub kernels without the lock; {_install_fix()}"
            ),
        )
        return
    try:
        requested = apply_requested()
    # kernlock.errors (and its `re`) is imported only on this path, not in every process
    except Exception as error:
        from kernlock.errors import UsageError

        if not isinstance(error, UsageError):
            raise
        sys.meta_path.insert(0, _Refuse(str(error).replace("{", "{{").replace("}", "}}")))
        return
    if requested:
        from kernlock._internal.runtime.autoapply import arm

        arm(os.path.dirname(os.path.abspath(__file__)))


if os.environ.get("KERNLOCK_APPLY", "").strip():
    _arm()


def _record(path: str) -> None:
    """Record every kernel request of this process into `path` (`kernlock lock --record`); the
    kernels load as they would without kernlock."""
    try:
        from kernlock._internal.runtime.recorder import arm
    except ImportError as error:
        sys.stderr.write(
            f"kernlock: warning: kernlock lock --record cannot record the kernels this process "
            f"loads: {sys.executable} cannot import kernlock ({error})\n"
        )
        return
    arm(path)


if os.environ.get("KERNLOCK_RECORD", "").strip():
    _record(os.environ["KERNLOCK_RECORD"])


def _chain() -> None:
    """Run the next `sitecustomize.py` on sys.path, which this one shadows."""
    # chained back into by an older kernlock's start-up dir
    if "_kernlock_startup_chain" in sys.modules:
        return
    sys.modules["_kernlock_startup_chain"] = type(sys)("_kernlock_startup_chain")
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            if _is_kernlock_startup(candidate):
                continue
            # importlib.util's own functions, from the import system every process has already
            # loaded: importing importlib.util pulls in contextlib, collections and functools (~3 ms
            # with Debian's sitecustomize)
            external = sys.modules.get("_frozen_importlib_external")
            bootstrap = sys.modules.get("_frozen_importlib")
            # not CPython's import system: the public names
            if external is None or bootstrap is None:
                import importlib.util

                external = bootstrap = importlib.util
            spec = external.spec_from_file_location("_kernlock_chained_sitecustomize", candidate)
            if spec and spec.loader:
                spec.loader.exec_module(bootstrap.module_from_spec(spec))
            return


def _is_kernlock_startup(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return b"# kernlock-startup-hook" in file.read(4096)
    except OSError:
        return False


_chain()
