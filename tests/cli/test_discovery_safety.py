"""Discovery reads a model; it never runs anything from it or from the Hub (reliability round 4, classes 1, 3, 4
and the model-config half of 11).

Each test plants code whose import writes a sentinel file and asserts the file never appears.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from helpers import CUDA_130, FA2, UNIVERSAL, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store.hub_cache import hub_cache_dir
from kernlock.testing.fixtures import push_build
from kernlock.testing.hub import TestHub
from scripts import families


def _sentinel_code(sentinel: Path) -> bytes:
    return f"import pathlib\npathlib.Path({str(sentinel)!r}).write_text('ran')\n".encode()


def _project(root: Path, config: dict) -> Path:
    project = make_project(root / "p", kernels=[FA2], targets=[CUDA_130], extra='\nmodels = ["./model"]')
    (project / "model").mkdir()
    (project / "model" / "config.json").write_text(json.dumps(config))
    return project


def _requests(hub: TestHub) -> Counter[str]:
    """The Hub requests made, API paths as they are and file downloads counted together (which repo's
    copy of a shared blob a lock fetches depends on its threads' order)."""
    return Counter("file downloads" if "/resolve/" in path else path.split("?")[0]
                   for _, path in hub.log if "agent-harnesses" not in path)


def _llama(root: Path) -> dict:
    families.save(root / "configs", only="llama")
    return json.loads((root / "configs" / "llama" / "config.json").read_text())


def test_a_config_naming_an_unlocked_hub_kernel_gets_it_locked_never_imported(hub: TestHub, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = tmp_path / "imported"
    push_build(hub.repo_path(UNIVERSAL), "v1", {"build/torch-universal/__init__.py": _sentinel_code(sentinel)},
               "an __init__ that runs on import")
    # the same spec declared, locked first in a project of its own: what locking it costs the Hub
    declared = make_project(tmp_path / "declared", kernels=[FA2, f"{UNIVERSAL}@v1"], targets=[CUDA_130],
                            extra='\nmodels = ["./model"]')
    (declared / "model").mkdir()
    (declared / "model" / "config.json").write_text(json.dumps(_llama(tmp_path)))
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(tmp_path / "cache-declared"))
    assert cli("lock", cwd=declared).exit_code == 0
    expected = _requests(hub)
    shutil.rmtree(hub_cache_dir(), ignore_errors=True)  # cold again, where a lock cached anything
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(tmp_path / "cache-named"))
    project = _project(tmp_path, {**_llama(tmp_path), "attn_implementation": f"{UNIVERSAL}@v1"})
    hub.reset_counts()
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert not sentinel.exists()  # on 962bae6 building the meta model imported the kernel
    assert f"{UNIVERSAL}@v1" in {k.spec for k in load_lockfile(project / "kernels.lock").kernels}
    named = _requests(hub)
    # exactly what locking the declared spec asked (on 962bae6 kernels' loader fetched the kernel on top), no model
    assert named == expected
    assert not [path for path in named if "/models/" in path or "/api/models" in path]


def test_a_remote_code_model_is_read_not_run(hub: TestHub, tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    project = _project(tmp_path, {"model_type": "custom", "architectures": ["CustomForCausalLM"],
                                  "auto_map": {"AutoConfig": "configuration_custom.CustomConfig",
                                               "AutoModelForCausalLM": "modeling_custom.CustomForCausalLM"}})
    (project / "model" / "configuration_custom.py").write_bytes(_sentinel_code(sentinel))
    (project / "model" / "modeling_custom.py").write_bytes(
        _sentinel_code(sentinel) + b"from kernels import get_kernel\n"
        b"def load():\n    return get_kernel('kernels-community/rwkv', version=1)\n")
    hub.reset_counts()
    result = cli("lock", cwd=project)  # stdin is empty: a "run the custom code? [y/N]" prompt would fail the lock
    assert result.exit_code == 0, result.output
    assert not sentinel.exists()
    assert not [path for _, path in hub.log if "/models/" in path or "/api/models" in path]  # no model code fetched
    [rwkv] = [k for k in load_lockfile(project / "kernels.lock").kernels if k.repo == "kernels-community/rwkv"]
    assert rwkv.used_by == ("./model: remote code at modeling_custom.py:5 (cuda: inference, training)",)


def test_a_million_layers_build_a_handful(hub: TestHub, tmp_path: Path) -> None:
    small = _project(tmp_path / "small", _llama(tmp_path))
    huge = _project(tmp_path / "huge", {**_llama(tmp_path), "num_hidden_layers": 1_000_000})
    for project in (small, huge):
        result = cli("lock", cwd=project)
        assert result.exit_code == 0, result.output
    # the same kernels: a model class needs one layer of each kind, not all of them
    assert ({k.spec for k in load_lockfile(huge / "kernels.lock").kernels}
            == {k.spec for k in load_lockfile(small / "kernels.lock").kernels})


def test_a_hundred_thousand_layer_types_build_one_of_each(hub: TestHub, tmp_path: Path) -> None:
    families.save(tmp_path / "configs", only="qwen3_next")
    config = json.loads((tmp_path / "configs" / "qwen3_next" / "config.json").read_text())
    kinds = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    project = _project(tmp_path, {**config, "num_hidden_layers": 100_000, "layer_types": kinds * 25_000})
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert "kernels-community/fla@v3" in {k.spec for k in load_lockfile(project / "kernels.lock").kernels}


@pytest.mark.parametrize(("config", "why"), [
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ('{"architectures": [123], "model_type": "llama"}', "`architectures` is not a list of class names"),
    ('{"model_type": "no-such-type"}', "model_type 'no-such-type' is not one this Transformers knows"),
    ("[1, 2]", "not a JSON object"),
])
def test_a_hostile_config_is_one_line(hub: TestHub, tmp_path: Path, config: str, why: str) -> None:
    project = _project(tmp_path, {})
    (project / "model" / "config.json").write_text(config)
    before = (project / "pyproject.toml").read_bytes()
    result = cli("lock", cwd=project)
    assert result.exit_code == 2, result.output
    [line, *fix] = result.output.strip().splitlines()
    assert line.startswith("kernlock: error: model ./model: cannot read its config.json (") and why in line, line
    assert not (project / "kernels.lock").exists() and (project / "pyproject.toml").read_bytes() == before


def test_a_config_that_is_a_device_is_refused_unread(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path, {})
    (project / "model" / "config.json").unlink()
    (project / "model" / "config.json").symlink_to("/dev/zero")
    result = cli("lock", cwd=project)
    assert result.exit_code == 2 and "is not a regular file" in result.output, result.output
