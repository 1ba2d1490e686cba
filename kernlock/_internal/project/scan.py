"""Find kernel specs and models in code and configs: every `attn_implementation` value (and
Accelerate's sequence-parallel `sp_attn_implementation`), every literal `get_kernel` call, every
model loaded.

* Python files, by AST: keyword arguments (`attn_implementation="org/repo"`),
  dict literals (`{"attn_implementation": "org/repo"}`), attribute
  assignments (`config.attn_implementation = "org/repo"`) and environment
  assignments (`os.environ["PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION"] = …`);
  literal `get_kernel` calls, in the file and in the TRL modules it imports
  (`kernel_loads`).
* YAML configs (TRL, Accelerate): `attn_implementation: org/repo` and
  `sp_attn_implementation:` keys.
* Shell scripts and launch files: `--attn_implementation X`,
  `--attn-implementation=X`, `--parallelism_config_sp_attn_implementation X`,
  `PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION=X`.

Only values that name a Hub kernel count (`org/repo…` or `flash_attention_N`);
`sdpa`, `eager` and other built-ins are ignored. A kernel-like value that does
not parse is an error naming its file and line.

Models (`scan_models`): the literal first argument of a model class's
`from_pretrained` (`AutoModelForCausalLM.from_pretrained("./model")`), and
`model_name_or_path` values (TRL's `--model_name_or_path`, YAML keys, keyword
arguments). A local path is taken relative to the project root.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from kernlock._internal.fs.bounded_read import SOURCE_LIMIT, UnreadableFile, read_bounded
from kernlock._internal.project.kernel_loads import file_loads, imported_loads
from kernlock._internal.spec.kernel_spec import (
    FLASH_ATTENTION_ALIASES,
    KernelSpec,
    Origin,
    parse_spec,
)

SP_ATTN_ENV = "PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION"  # Accelerate's, read by ParallelismConfig
KEYS = ("attn_implementation", "_attn_implementation", "sp_attn_implementation", SP_ATTN_ENV)
PYTHON_SUFFIXES = {".py"}
YAML_SUFFIXES = {".yaml", ".yml"}
SHELL_SUFFIXES = {".sh", ".bash", ".slurm", ".sbatch", ".zsh"}
_SKIP_DIRS = {
    ".git",
    ".hg",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    "build",
    "dist",
}
_YAML_RE = re.compile(
    r"^\s*(?:-\s*)?[\"']?(?:_|sp_)?attn_implementation[\"']?\s*:\s*(?P<value>[^#\s][^#]*?)\s*(?:#.*)?$"
)
_SHELL_RE = re.compile(
    r"(?:--(?:parallelism[_-]config[_-]sp[_-])?attn[_-]implementation(?:=|\s+)|"
    rf"\b{SP_ATTN_ENV}=)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\\;&|]+)"
)
MODEL_KEYS = ("model_name_or_path", "pretrained_model_name_or_path")
_YAML_MODEL_RE = re.compile(
    r"^\s*(?:-\s*)?[\"']?model_name_or_path[\"']?\s*:\s*(?P<value>[^#\s][^#]*?)\s*(?:#.*)?$"
)
_SHELL_MODEL_RE = re.compile(
    r"--model[_-]name[_-]or[_-]path(?:=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s\\;&|]+)"
)


def is_kernel_value(value: str) -> bool:
    """Whether an `attn_implementation` value names a Hub kernel rather than a built-in."""
    body = value.split("|", 1)[1] if "|" in value else value
    return "/" in body or "@" in body or body in FLASH_ATTENTION_ALIASES


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _constant(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _read(path: Path, skipped: list[str] | None) -> str | None:
    """The text of a file to scan; None (and a line in `skipped`) for one that is not a regular
    file under the source cap, or not UTF-8 text."""
    try:
        return read_bounded(path, SOURCE_LIMIT).decode("utf-8")
    except UnreadableFile as error:
        if skipped is not None:
            skipped.append(f"{error}; --scan did not read it")
    except UnicodeDecodeError:
        pass  # a binary file with a scanned suffix holds no spec
    return None


def _python_values(path: Path, text: str, skipped: list[str] | None) -> list[tuple[str, int, bool]]:
    """(value, line, literal) of every `attn_implementation` site; a non-literal's value is its
    source text. A file Python cannot parse (or nests too deep to) has none."""
    try:
        return list(_sites(ast.parse(text, filename=str(path))))
    except SyntaxError:
        return []
    except (ValueError, RecursionError, MemoryError):
        if skipped is not None:
            skipped.append(
                f"{os.path.relpath(path)} nests too deep to read; --scan did not read it"
            )
        return []


def _sites(tree: ast.AST) -> Iterator[tuple[str, int, bool]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in KEYS:
            values = [node.value]
        elif isinstance(node, ast.Dict):
            values = [
                v
                for k, v in zip(node.keys, node.values, strict=False)
                if isinstance(k, ast.Constant) and k.value in KEYS
            ]
        elif isinstance(node, ast.Assign) and any(
            (isinstance(t, ast.Attribute) and t.attr in KEYS)
            or (isinstance(t, ast.Subscript) and _constant(t.slice) in KEYS)
            for t in node.targets
        ):
            values = [node.value]
        else:
            continue
        for value in values:
            if not isinstance(value, ast.Constant):
                yield ast.unparse(value), value.lineno, False
            elif isinstance(value.value, str):
                yield value.value, value.lineno, True


def _line_values(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[str, int, bool]]:
    """(value, line, literal) of every match; a value the shell expands (`$ATTN`) is not literal."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#") and pattern is _SHELL_RE:
            continue
        for match in pattern.finditer(line):
            value = _unquote(match.group("value"))
            yield value, number, "$" not in value and "`" not in value


def scan_file(path: Path, skipped: list[str] | None = None) -> list[KernelSpec]:
    """Kernel specs named in one file; each site whose value is not a literal is added to `skipped`
    as a message."""
    suffix = path.suffix.lower()
    text = _read(path, skipped)
    if text is None:
        return []
    values: Iterable[tuple[str, int, bool]]
    if suffix in PYTHON_SUFFIXES:
        values = _python_values(path, text, skipped)
    elif suffix in YAML_SUFFIXES:
        values = _line_values(text, _YAML_RE)
    else:
        values = _line_values(text, _SHELL_RE)
    where = os.path.relpath(path)
    specs = []
    for value, line, literal in sorted(values, key=lambda site: site[1]):
        if not literal:
            if skipped is not None:
                skipped.append(
                    f"{where}:{line}: attn_implementation={value[:60]} is not a literal, so --scan "
                    "cannot lock what it names; list that kernel in [tool.kernlock] kernels"
                )
        elif is_kernel_value(value):
            specs.append(parse_spec(value, Origin(where, line)))
    if suffix in PYTHON_SUFFIXES:
        specs.extend(file_loads(path))
    return specs


def _files(paths: Iterable[Path]) -> Iterator[Path]:
    suffixes = PYTHON_SUFFIXES | YAML_SUFFIXES | SHELL_SUFFIXES
    for path in paths:
        if path.is_file():
            yield path
            continue
        for directory, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                candidate = Path(directory) / name
                if candidate.suffix.lower() in suffixes:
                    yield candidate


def scan_paths(paths: Iterable[Path], skipped: list[str] | None = None) -> list[KernelSpec]:
    """Kernel specs in files and directories (recursively), in path order (non-literal sites into
    `skipped`)."""
    specs: list[KernelSpec] = []
    files = list(_files(paths))
    for path in files:
        specs.extend(scan_file(path, skipped))
    specs.extend(imported_loads(p for p in files if p.suffix.lower() in PYTHON_SUFFIXES))
    return specs


class ModelRef(NamedTuple):
    """A model the code loads: its name (a local path or a Hub model id) and where it is named."""

    name: str
    origin: Origin


def _is_model_class(node: ast.expr) -> bool:
    """`AutoModelForCausalLM`, `LlamaForCausalLM`, `transformers.AutoModel`: a model class, not a
    tokenizer."""
    name = (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )
    return "Model" in name or "For" in name


def _python_models(tree: ast.AST) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "from_pretrained"
                and _is_model_class(func.value)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.args[0].value, node.lineno
            for keyword in node.keywords:
                if (
                    keyword.arg in MODEL_KEYS
                    and isinstance(keyword.value, ast.Constant)
                    and isinstance(keyword.value.value, str)
                ):
                    yield keyword.value.value, keyword.value.lineno
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                if (
                    isinstance(key, ast.Constant)
                    and key.value in MODEL_KEYS
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    yield value.value, value.lineno


def _model_refs(path: Path) -> Iterator[tuple[str, int]]:
    suffix = path.suffix.lower()
    text = _read(path, None)
    if text is None:
        return
    if suffix in PYTHON_SUFFIXES:
        try:
            found = list(_python_models(ast.parse(text, filename=str(path))))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        yield from found
        return
    pattern = _YAML_MODEL_RE if suffix in YAML_SUFFIXES else _SHELL_MODEL_RE
    yield from ((value, line) for value, line, literal in _line_values(text, pattern) if literal)


def scan_models(paths: Iterable[Path]) -> list[ModelRef]:
    """The models code and configs under `paths` load, by literal name, in path order (each name
    once)."""
    found: dict[str, ModelRef] = {}
    for path in _files(paths):
        for name, line in _model_refs(path):
            if name and not name.startswith("$"):
                found.setdefault(name, ModelRef(name, Origin(os.path.relpath(path), line)))
    return list(found.values())
