"""What kernlock supports: the doctor's fixes name installable releases, and pyproject.toml agrees with them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kernlock import doctor
from kernlock.transformers_compat import TransformersInfo

ROOT = Path(__file__).resolve().parents[1]


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
        # Transformers 5.23+ accepts no kernels this kernlock supports: install a Transformers that does.
        ("0.17.2", "5.23.0", ("0.18.2", "0.19"), "pip install 'transformers>=5.18,<5.23'"),
        ("0.17.2", "5.25.0", ("0.19.1", "0.20"), "pip install 'transformers>=5.18,<5.23'"),
        ("0.17.2", "5.17.0", ("0.16.0", "0.17"), "pip install 'transformers>=5.18,<5.23'"),
        # kernels 0.16 is not supported: with Transformers 5.15-5.17 (0.16 only) both change.
        ("0.16.2", "5.17.0", ("0.16.0", "0.17"), "pip install 'kernels>=0.17.0,<0.18' 'transformers>=5.18,<5.23'"),
        ("0.16.2", "5.22.2", ("0.17.2", "0.18"), "pip install 'kernels>=0.17.2,<0.18'"),
        ("0.16.2", None, None, "pip install 'kernels>=0.17.0,<0.18'"),
        ("0.18.2", "5.23.0", ("0.18.2", "0.19"), "pip install 'kernels>=0.17.0,<0.18' 'transformers>=5.18,<5.23'"),
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
    from kernlock.lockfile import LockedKernel, LockedVariant

    monkeypatch.setattr(doctor, "installed_version", {"kernels": "0.17.0"}.get)
    kernel = LockedKernel(spec="org/k", repo="org/k", commit="0" * 40, resolution="", trust="allowlist")
    needs = {v: LockedVariant(name="torch-cpu", targets=(), files=(), kernels_minver=v) for v in ("0.17.2", "0.18.2")}
    [within] = doctor.minver_findings([(kernel, needs["0.17.2"])])
    assert within.fix == "pip install 'kernels>=0.17.2,<0.18'"
    [beyond] = doctor.minver_findings([(kernel, needs["0.18.2"])])
    assert beyond.fix == "lock a build of org/k that accepts kernels 0.17.0: kernlock lock org/k@<older revision>"
