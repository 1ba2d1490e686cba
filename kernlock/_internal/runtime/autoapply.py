"""Start-up hook: with `KERNLOCK_APPLY=1`, apply the lock when `kernels` or `transformers` is first
imported.

`kernlock run` puts `kernlock/_internal/runtime/_startup` on `PYTHONPATH`; its `sitecustomize.py`
calls `arm()` when `KERNLOCK_APPLY=1`. Arming only adds a finder to
`sys.meta_path` (no kernlock module beyond this one is imported, nothing is read),
so a process that never imports `kernels` or `transformers` — `pip`, a
dataloader worker, `python -c pass` — pays well under a millisecond and can never
fail because of kernlock. The first import of either package (or a
`find_spec` for it) applies the lock before that package's code runs, so every
kernel load is bound and checked as with `kernlock.apply()`; a lock that cannot
cover this environment stops the process with one line and exit code 1, and so
does a refusal that escapes the program uncaught (an unlocked kernel inside `trl
sft`): one `kernlock: error:` line instead of the traceback of every library it
passed through (the traceback follows it with `KERNLOCK_VERBOSE=1`).
kernlock's own commands `disarm()` the hook (`kernlock lock` works with no lock yet).
"""

from __future__ import annotations

import os
import sys
from _thread import RLock

from kernlock._internal.settings import APPLY_ENV, FALSE, verbose

# not typing's: importing typing in every process is start-up cost; type checkers know the name
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

TRIGGERS = frozenset({"kernels", "transformers"})
# `kernlock run` puts it on PYTHONPATH
STARTUP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")
_lock = RLock()


class ApplyOnImport:
    """A meta-path finder that finds nothing: it applies the lock on the first import of a
    trigger."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname in TRIGGERS and self in sys.meta_path:
            with _lock:
                if self in sys.meta_path:
                    disarm()
                    _apply_or_exit()
        return None


def arm(startup: str | None = None) -> None:
    """Apply the lock at the first import of `kernels` or `transformers` in this process; refusals
    print in one line.

    With `startup` (the start-up dir whose sitecustomize armed the hook), the
    Python processes this one starts keep the hook too (`guard_children`).
    """
    if not any(isinstance(finder, ApplyOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, ApplyOnImport())
        sys.excepthook = _refusals_in_one_line(sys.excepthook)
    if startup is not None:
        guard_children(startup)


def disarm() -> None:
    """Remove the start-up hook from this process (kernlock's own commands)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, ApplyOnImport)]


def _apply_or_exit() -> None:
    from kernlock._internal.runtime.apply import active_lock, apply
    from kernlock.errors import KernlockError

    if active_lock() is not None:
        return
    try:
        apply()
    except KernlockError as error:
        sys.stderr.write(f"kernlock: error: {error}\n")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        # inside an import: an exception could be swallowed by `try: import …` and the lock skipped
        os._exit(1)


def _refusals_in_one_line(previous: Callable[..., object]) -> Callable[..., None]:
    """An excepthook that prints an uncaught kernlock refusal, however wrapped, as its one
    `kernlock: error:` line.

    A failure that only carries such a line (a launcher re-raising its child's
    stderr, as `accelerate launch` under `trl sft` does) adds no traceback: the
    child already printed the line. `KERNLOCK_VERBOSE=1` adds the traceback.
    """

    def hook(kind: type[BaseException], value: BaseException, traceback: object) -> None:
        from kernlock.errors import KernlockError

        chain: list[BaseException] = []
        error: BaseException | None = value
        while error is not None and error not in chain:
            chain.append(error)
            error = error.__cause__ or error.__context__
        refusal = next((e for e in chain if isinstance(e, KernlockError)), None)
        relayed = any("kernlock: error: " in f"{e} {getattr(e, 'stderr', '')}" for e in chain)
        if refusal is None and not relayed:
            previous(kind, value, traceback)
            return
        if refusal is not None:
            sys.stderr.write(f"kernlock: error: {refusal}\n")
        if verbose():
            previous(kind, value, traceback)

    return hook


# The second line of defence: a process under the hook passes it on to the processes it starts.
_guard: dict = {}


def _is_python(name: str) -> bool:
    """Whether a program name is a Python interpreter's: python, python3.11, python3.11-dbg,
    python3.13t, pypy3."""
    for stem in ("python", "pypy"):
        if name.startswith(stem):
            rest = name[len(stem) :].removesuffix("-dbg").removesuffix("-debug").rstrip("dmtu")
            return not rest or rest.replace(".", "").isdigit()
    return False


def runs_python(argv0: str, program: str | None) -> bool:
    """Whether a command's program is a Python interpreter: by its name, or by the file it
    resolves to (the venv's Python linked as `py`, `trainer`)."""
    if _is_python(os.path.basename(argv0)):
        return True
    return program is not None and _is_python(os.path.basename(os.path.realpath(program)))


def shebang_argv(program: str) -> list[str] | None:
    """The interpreter and its options from `program`'s `#!` line (a console script:
    `#!/usr/bin/python3 -I`, `#!/usr/bin/env -S python3 -E`), or None when it has none or cannot be
    read."""
    try:
        with open(program, "rb") as script:
            first = script.read(256).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = os.fsdecode(first[2:]).strip().split(None, 1)
    if not parts:
        return None
    interpreter, argument = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    if os.path.basename(interpreter) == "env":
        words = argument.split()
        words = (
            words[1:]
            if words[:1] in (["-S"], ["--split-string"])
            else [argument]
            if argument
            else []
        )
        return words or None
    # the kernel passes the rest as one argument
    return [interpreter, argument] if argument else [interpreter]


def hook_skipping_option(
    argv: list[str] | tuple[str, ...], program: str | None = None
) -> str | None:
    """The option (`-E`, `-I`, `-S`, or a cluster such as `-BE`) with which a Python command line
    skips the start-up hook; with `program` (the file `argv[0]` runs), also one its `#!` line gives
    its Python (a console script)."""
    if not argv:
        return None
    if not runs_python(os.fsdecode(argv[0]), program):
        interpreter = shebang_argv(program) if program else None
        if interpreter is None or not _is_python(os.path.basename(interpreter[0])):
            return None
        return hook_skipping_option([*interpreter, os.fsdecode(argv[0])])
    args = [os.fsdecode(arg) for arg in argv[1:]]
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "-" or arg == "--" or not arg.startswith("-"):
            return None
        if arg.startswith("--"):
            index += 1 if "=" in arg or arg in ("--help", "--version") else 2
            continue
        for position, letter in enumerate(arg[1:], 1):
            if letter in "EIS":
                return arg
            if letter in "cm":
                return None
            if letter in "WX":
                index += 1 if arg[position + 1 :] else 2
                break
        else:
            index += 1
    return None


def guard_children(startup: str) -> None:
    """Make every process this one starts through `os.exec*`, `os.posix_spawn*` or `subprocess` keep
    the hook.

    A child environment that dropped `startup` from `PYTHONPATH` (overwritten), put
    another `sitecustomize` in front of it (ddtrace-run style: it still runs, chained
    after kernlock's) or lost kernlock's variables (rebuilt from scratch) is repaired;
    `KERNLOCK_APPLY=0` set for the child is left alone. A child Python started with
    `-E`, `-I` or `-S` cannot be repaired (it ignores PYTHONPATH or sitecustomize):
    one warning line names it. Nothing is imported here; the wrappers cost nothing until called.
    """
    if _guard:
        return
    _guard.update(
        startup=startup,
        inherited={k: v for k, v in os.environ.items() if k.startswith("KERNLOCK_")},
    )
    import _posixsubprocess

    fork_exec, execve, execv = _posixsubprocess.fork_exec, os.execve, os.execv

    def guarded_fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, *rest):  # noqa: ANN001, ANN202
        _warn_if_skipped(args)
        source = (
            os.environ
            if env is None
            else dict(os.fsdecode(item).partition("=")[::2] for item in env)
        )
        repaired = child_environment(source)
        if repaired is not None:
            env = [os.fsencode(f"{key}={value}") for key, value in repaired.items()]
        return fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, *rest)

    def guarded_execve(path, args, env):  # noqa: ANN001, ANN202
        _warn_if_skipped(args)
        return execve(path, args, child_environment(env) or env)

    def guarded_execv(path, args):  # noqa: ANN001, ANN202
        _warn_if_skipped(args)
        repaired = child_environment(os.environ)
        return execv(path, args) if repaired is None else execve(path, args, repaired)

    _posixsubprocess.fork_exec = guarded_fork_exec
    os.execve, os.execv = guarded_execve, guarded_execv
    for name in ("posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            os.__dict__[name] = _guarded_spawn(getattr(os, name))


def _guarded_spawn(spawn: Callable[..., int]) -> Callable[..., int]:
    def guarded(path, argv, env, *args, **kwargs):  # noqa: ANN001, ANN202
        _warn_if_skipped(argv)
        return spawn(path, argv, child_environment(env) or env, *args, **kwargs)

    return guarded


def child_environment(env: Mapping[str, str]) -> dict[str, str] | None:
    """`env` repaired so that a child Python keeps the start-up hook, or None when it needs
    nothing."""
    startup = _guard.get("startup")
    if startup is None:
        return None
    if APPLY_ENV in env and str(env[APPLY_ENV]).strip().lower() in (*FALSE, ""):
        # the child was explicitly asked to run without the lock (a bad value: its hook refuses it)
        return None
    repaired = {str(key): str(value) for key, value in env.items()}
    if APPLY_ENV not in env:  # an environment rebuilt without kernlock's variables
        repaired.update(_guard["inherited"])
    paths = [entry for entry in repaired.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if paths[:1] != [startup]:
        repaired["PYTHONPATH"] = os.pathsep.join(
            [startup, *[entry for entry in paths if entry != startup]]
        )
    return repaired if repaired != dict(env) else None


def _warn_if_skipped(argv: object) -> None:
    try:
        args = list(argv)  # type: ignore[call-overload]
        first = os.fsdecode(args[0]) if args else ""
        if first and os.sep not in first and not _is_python(first):
            # only on a child's start, and only for a program that may be a console script
            import shutil

            program = shutil.which(first)
        else:
            program = first or None
        option = hook_skipping_option(args, program)
    except (TypeError, ValueError):
        return
    if option is not None and not _guard.get("warned"):
        _guard["warned"] = True
        command = os.path.basename(os.fsdecode(list(argv)[0]))  # type: ignore[call-overload]
        sys.stderr.write(
            f"kernlock: warning: a process under kernlock run starts `{command} {option}`, which "
            "skips kernlock's start-up hook, so kernels it imports are not locked; drop the "
            "option or call kernlock.apply() in its script\n"
        )
