"""The models a project trains: `[tool.kernlock] models` and the models its scanned code loads.

A local model is named by its directory relative to the project root (`./model`),
so the same directory declared and found by `--scan` is one model; anything else
is a Hub model id. A name found by `--scan` counts only when it is a directory
with a `config.json` or has the shape of a Hub model id (`org/name`): code names
placeholders and tokenizers too, and a declared model is what the user vouches for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from kernlock._internal.project.config import Project
from kernlock._internal.project.scan import ModelRef, scan_models


def model_name(name: str, root: Path) -> str:
    """The canonical name of a declared model: `./dir` for a directory under `root`, else `name` as
    written."""
    local = root / name
    if not local.is_dir():
        return name
    relative = Path(os.path.relpath(local.resolve(), root.resolve())).as_posix()
    return relative if relative == "." or relative.startswith("..") else f"./{relative}"


def _plausible(name: str, root: Path) -> bool:
    """Whether a scanned name is a model: a directory with a config.json, or a Hub model id."""
    if (root / name / "config.json").is_file():
        return True
    return (
        not (root / name).exists()
        and re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None
        and ".." not in name
    )


def project_models(project: Project, scan: Iterable[str] = ()) -> list[ModelRef]:
    """Every model the project declares or its scanned files load (each once, canonical names,
    sorted)."""
    from kernlock._internal.spec.kernel_spec import Origin

    pyproject = os.path.relpath(project.pyproject)
    found = [ModelRef(name, Origin(pyproject, project.lines.get(name))) for name in project.models]
    paths = [*(project.root / p for p in project.scan), *(Path(p) for p in scan)]
    found += [
        ref
        for ref in scan_models(p for p in paths if p.exists())
        if _plausible(ref.name, project.root)
    ]
    models: dict[str, ModelRef] = {}
    for ref in found:
        name = model_name(ref.name, project.root)
        models.setdefault(name, ref._replace(name=name))
    return [models[name] for name in sorted(models)]
