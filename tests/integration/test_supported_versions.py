"""What kernlock supports: the doctor's fixes name installable releases, and pyproject.toml agrees with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomllib
from packaging.requirements import Requirement

from helpers import REPO_ROOT
from kernlock._internal.compat.transformers import TransformersInfo
from kernlock._internal.rules import doctor

ROOT = REPO_ROOT


def _environment(monkeypatch: pytest.MonkeyPatch, kernels: str | None, transformers: str | None,
                 window: tuple[str, str] | None) -> None:
    versions = {"kernels": kernels, "transformers": transformers}
    monkeypatch.setattr(doctor, "installed_version", versions.get)
    monkeypatch.setattr(doctor, "installed_transformers", lambda: TransformersInfo(version=transformers, root=None))
    monkeypatch.setattr(doctor, "kernels_window", lambda: window)


@pytest.mark.parametrize(
    ("kernels", "transformers", "window", "fix"),
    [
        ("0.17.2", "5.22.2", ("0.17.2", "0.18"), None),
        ("0.17.0", "5.18.0", ("0.17.0", "0.18"), None),
        ("0.17.2", None, None, None),
        # Transformers 5.20 accepts only 0.17.2+: a supported kernels fits.
        ("0.17.0", "5.20.0", ("0.17.2", "0.18"), "pip install 'kernels>=0.17.2,<0.18'"),
        # Transformers 5.23+ accepts only kernels 0.18/0.19, which this kernlock supports: upgrade kernels.
        ("0.17.2", "5.23.0", ("0.18.2", "0.19"), "pip install 'kernels>=0.18.2,<0.19'"),
        ("0.17.2", "5.25.0", ("0.19.1", "0.20"), "pip install 'kernels>=0.19.1,<0.20'"),
        ("0.18.3", "5.25.0", ("0.19.1", "0.20"), "pip install 'kernels>=0.19.1,<0.20'"),
        ("0.18.2", "5.23.0", ("0.18.2", "0.19"), None),
        ("0.19.1", "5.25.0", ("0.19.1", "0.20"), None),
        # Transformers 5.17 (what vllm 0.31's `transformers<5.18` leaves) accepts only kernels 0.16: the fix keeps
        # that Transformers and moves kernels into its window, which this kernlock supports from 0.16.2.
        ("0.17.2", "5.17.0", ("0.16.0", "0.17"), "pip install 'kernels>=0.16.2,<0.17'"),
        ("0.16.2", "5.17.0", ("0.16.0", "0.17"), None),  # `pip install "trl[vllm,kernels]"`
        ("0.16.0", "5.17.0", ("0.16.0", "0.17"), "pip install 'kernels>=0.16.2,<0.17'"),
        ("0.16.2", "5.22.2", ("0.17.2", "0.18"), "pip install 'kernels>=0.17.2,<0.18'"),
        ("0.16.2", None, None, None),
        # kernels 0.15 is not supported: with a Transformers accepting 0.15 only, both change.
        ("0.15.0", "5.14.0", ("0.15.0", "0.16"), "pip install 'kernels>=0.16.2,<0.20' 'transformers>=5.17,<5.26'"),
        # A kernels from after this kernlock: back into the window Transformers accepts.
        ("0.20.0", "5.25.0", ("0.19.1", "0.20"), "pip install 'kernels>=0.19.1,<0.20'"),
    ],
)
def test_kernels_fix_names_a_supported_release(monkeypatch: pytest.MonkeyPatch, kernels: str, transformers: str | None,
                                               window: tuple[str, str] | None, fix: str | None) -> None:
    _environment(monkeypatch, kernels, transformers, window)
    finding = doctor.kernels_support_finding() or doctor.kernels_window_finding()
    assert (finding.fix if finding else None) == fix
    if finding is not None:
        assert finding.blocking and f"kernels {kernels}" in finding.message


def test_pyproject_declares_what_the_doctor_supports() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    low, high = doctor.SUPPORTED_KERNELS
    assert requirements["kernels"].specifier == Requirement(f"kernels>={low},<{high}").specifier
    low, high = doctor.SUPPORTED_TRANSFORMERS
    for extra in ("transformers", "trl"):
        [pin] = [Requirement(r) for r in project["optional-dependencies"][extra] if r.startswith("transformers")]
        assert pin.specifier == Requirement(f"transformers>={low},<{high}").specifier, extra


def test_minver_fix_stays_within_supported_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant

    monkeypatch.setattr(doctor, "installed_version", {"kernels": "0.17.0"}.get)
    monkeypatch.setattr(doctor, "kernels_window", lambda: ("0.17.0", "0.18"))  # Transformers 5.18/5.19
    kernel = LockedKernel(spec="org/k", repo="org/k", commit="0" * 40, resolution="", trust="allowlist")
    needs = {v: LockedVariant(name="torch-cpu", targets=(), files=(), kernels_minver=v) for v in ("0.17.2", "0.18.2")}
    [within] = doctor.minver_findings([(kernel, needs["0.17.2"])])
    assert within.fix == "pip install 'kernels>=0.17.2,<0.18'"
    [beyond] = doctor.minver_findings([(kernel, needs["0.18.2"])])  # beyond what that Transformers accepts
    assert beyond.fix == "lock a build of org/k that accepts kernels 0.16.2: kernlock lock org/k@<older revision>"
    monkeypatch.setattr(doctor, "kernels_window", lambda: None)  # no Transformers: the whole supported window
    [newer] = doctor.minver_findings([(kernel, needs["0.18.2"])])
    assert newer.fix == "pip install 'kernels>=0.18.2,<0.20'"


def _support_table_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("support_table", ROOT / "scripts" / "support_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_support_table_is_the_last_matrix_run() -> None:
    import subprocess
    import sys

    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "support_table.py"), "--check"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "| kernels | transformers | huggingface_hub | torch | result |" in (ROOT / "docs" / "reference" / "supported-versions.md").read_text()


def test_support_table_shows_each_cell_and_the_fix_it_ran(tmp_path: Path) -> None:
    import json

    base: dict[str, Any] = {"kernlock": "0123abc", "installed": {"python": "3.11.7", "kernels": "0.17.2", "transformers": "5.22.2", "huggingface_hub": "2.4.0",
                          "torch": "2.13.0+cpu"}, "slice": {"tests": 9, "failures": 0, "errors": 0, "skipped": 1}}
    cells = {
        "ok": {**base, "requested": {"kernels": "0.17.2", "transformers": "5.22.2", "huggingface_hub": None},
               "outcome": "pass", "refusal": None, "fix": None},
        "old": {**base, "requested": {"kernels": "0.16.2", "transformers": "5.17.0", "huggingface_hub": None},
                "installed": {**base["installed"], "kernels": "0.16.2", "transformers": "5.17.0"},
                "outcome": "refused, fix works", "refusal": "kernlock 0.1.0 supports kernels>=0.17.0,<0.18",
                "fix": "pip install 'kernels>=0.17.0,<0.18' 'transformers>=5.18,<5.23'"},
    }
    cells["trl"] = {**cells["ok"], "requested": {"kernels": None, "transformers": None, "huggingface_hub": None,
                                                 "trl": "newest"},
                    "installed": {**base["installed"], "trl": "1.16.0"}}  # the same versions as "ok": a tie
    cells["capped"] = {"kernlock": "0123abc", "installed": None, "outcome": "could not install",
                       "problem": "this machine's pip configuration caps torch (torch<=2.14.1)", "refusal": None, "fix": None,
                       "requested": {"kernels": "0.19.1", "transformers": "5.25.0", "huggingface_hub": None, "torch": "2.15.0"}}
    for name, record in cells.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({**record, "cell": name}))
    rows = _support_table_module().table(tmp_path).splitlines()
    assert rows.pop(2) == ("| 0.19.1 | 5.25.0 | — | 2.15.0 | could not install: this machine's pip configuration caps torch "
                           "(torch<=2.14.1) | — |")
    assert rows[2] == "| 0.17.2 | 5.22.2 (pip's pick for trl 1.16.0) | 2.4.0 | 2.13.0+cpu | pass (8 tests) | — |"  # ties: by name
    assert rows[3] == "| 0.17.2 | 5.22.2 | 2.4.0 | 2.13.0+cpu | pass (8 tests) | — |"
    assert rows[4] == ("| 0.16.2 | 5.17.0 | 2.4.0 | 2.13.0+cpu | refused, fix works (8 tests) | kernlock 0.1.0 supports "
                       "kernels>=0.17.0,<0.18; `pip install 'kernels>=0.17.0,<0.18' 'transformers>=5.18,<5.23'` |")
