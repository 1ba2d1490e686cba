"""Benchmark — `kernlock lock` of a project declaring 5 models of different families (issue 43).

Five tiny configs (`config.json` only, as checkpoints ship them: Llama, Qwen3-MoE, gpt-oss with an
mxfp4 `quantization_config`, RWKV, Mamba2) are declared in `[tool.kernlock] models`, for a CUDA
target (the specs-only project locks the same repos for it); discovery reads Transformers' mapping, the models' code and the quantizer.
Side by side, fresh processes and fresh HF_HOMEs, interleaved:

* `kernlock lock` of the 5 models (discovery, then resolution of what it found);
* `kernlock lock` of the same repos written as specs (no models: resolution alone);
* `kernels lock` of the same repos (the anchor; it resolves commits only, for no target).

The figure: discovery's cost over the specs-only lock, and its Hub requests (none of its own: a
local model's config is read from disk).
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.harness import (
    KERNELS_CLI,
    Result,
    Target,
    Workspace,
    child_env,
    kernlock_lock_argv,
    ratio,
    run_child,
    running_hub,
    summarize,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir

NAME = "models"
FAMILIES = ("llama", "qwen3_moe", "gpt_oss_mxfp4", "rwkv", "mamba2")
CUDA_130 = "torch2.11-cxx11-cu130-x86_64-linux"
TOOLS = ("kernels lock", "kernlock lock (specs)", "kernlock lock (5 models)")


def _configs(root: Path) -> None:
    """The tiny family configs the suite declares (tests/scripts/families.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from scripts import families

    for family in FAMILIES:
        families.save(root, only=family)


def _pyproject(root: Path, body: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = ["[project]", 'name = "bench"', 'version = "0"', "", *body]
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return root


def _models_project(root: Path, configs: Path) -> Path:
    for family in FAMILIES:
        (root / family).mkdir(parents=True)
        (root / family / "config.json").write_bytes((configs / family / "config.json").read_bytes())
    models = ", ".join(f'"./{family}"' for family in FAMILIES)
    return _pyproject(root, ["[tool.kernlock]", f'targets = ["{CUDA_130}"]', f"models = [{models}]"])


def _specs_project(root: Path, specs: list[str]) -> Path:
    listed = ", ".join(f'"{s}"' for s in specs)
    return _pyproject(root, ["[tool.kernlock]", f'targets = ["{CUDA_130}"]', f"kernels = [{listed}]"])


def _kernels_project(root: Path, specs: list[str]) -> Path:
    deps = [f'"{s.split("@v")[0]}" = {s.split("@v")[1]}' for s in specs if "@v" in s]
    return _pyproject(root, ["[tool.kernels.dependencies]", *deps])


def run(ws: Workspace, quick: bool) -> Result:
    reps = 1 if quick else 3
    result = Result(NAME)
    configs = ws.path("configs")
    _configs(configs)
    repos = build_fixture_repos(default_fixtures_dir(), ws.path("bundled-repos"))
    with running_hub(repos) as hub:
        probe = _models_project(ws.path("probe"), configs)
        run_child(kernlock_lock_argv(probe), hub, child_env(hub, ws.path("hf-home")))
        specs = sorted(k.spec for k in load_lockfile(probe / "kernels.lock").kernels)
        runs: dict[str, list] = {tool: [] for tool in TOOLS}
        for _ in range(reps):
            for tool in TOOLS:  # interleaved, so drift hits every tool alike
                if tool == "kernels lock":
                    project = _kernels_project(ws.path("kernels"), specs)
                    argv = [KERNELS_CLI, "lock", str(project)]
                elif tool == "kernlock lock (specs)":
                    argv = kernlock_lock_argv(_specs_project(ws.path("specs"), specs))
                else:
                    argv = kernlock_lock_argv(_models_project(ws.path("models"), configs))
                runs[tool].append(run_child(argv, hub, child_env(hub, ws.path("hf-home"))))
    summaries = {tool: summarize(runs[tool]) for tool in TOOLS}
    models, plain = summaries["kernlock lock (5 models)"], summaries["kernlock lock (specs)"]
    for tool, s in summaries.items():
        result.rows.append({
            "tool": tool, "kernels": len(specs), "reps": s["reps"], "median_ms": s["wall_ms"],
            "requests": s["requests"],
            "vs_specs": ratio(s["wall_ms"], plain["wall_ms"]) if tool != "kernels lock" else "",
        })
    result.notes.append(f"locked for the 5 models: {', '.join(specs)}")
    result.targets.append(Target("models: discovery adds no Hub request over the same specs",
                                 f"{models['requests']} vs {plain['requests']}", "equal",
                                 models["requests"] == plain["requests"]))
    result.data["summaries"] = summaries
    result.data["specs"] = specs
    return result
