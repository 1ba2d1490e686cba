"""The compatibility doctor on locks resolved against an in-memory Hub, with the installed versions stubbed."""

from __future__ import annotations

import collections
import json
import sys
import sysconfig
from pathlib import Path

import pytest

from fake_hub import FakeHub
from kernlock._internal.compat.transformers import TransformersInfo
from kernlock._internal.resolve.resolver import ResolveOptions, resolver_for
from kernlock._internal.rules import doctor
from kernlock._internal.spec.kernel_spec import parse_spec
from kernlock._internal.spec.target import parse_target

CPU = parse_target("torch2.13-cxx11-cpu-x86_64-linux")
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
NOARCH_VARIANT = "torch-universal"
REPO = "kernels-community/prov"
VersionInfo = collections.namedtuple("VersionInfo", "major minor micro releaselevel serial")  # like sys.version_info


def variant(**metadata: object) -> dict[str, bytes]:
    """A build variant's files: code and a metadata.json with `metadata` merged in."""
    document = {"id": "_prov_0", "name": "prov", "version": 1, "license": "Apache-2.0", "python-depends": [],
                "backend": {"type": "cpu"}, **metadata}
    return {"__init__.py": b"X = 1\n", "metadata.json": json.dumps(document).encode()}


@pytest.fixture
def hub() -> FakeHub:
    hub = FakeHub()
    hub.add_commit(REPO, "v1", {CPU_VARIANT: variant()})
    hub.add_commit(REPO, "v2", {CPU_VARIANT: variant(**{"kernels-minver": "0.99.0", "python-depends": ["einops"]})})
    hub.add_commit(REPO, "v3", {CPU_VARIANT: variant(**{"kernels-minver": "0.17.2"})})
    hub.add_commit(REPO, "v4", {NOARCH_VARIANT: variant(backend={"type": "cpu"})})
    return hub


def entries(hub: FakeHub, spec: str) -> list:
    """(kernel, variant) of `spec` locked for the CPU target, as `verify` hands them to the doctor."""
    lock = resolver_for(hub, ResolveOptions(targets=(CPU,)), None, workers=1).resolve([parse_spec(spec)])
    return [(kernel, kernel.variant_for(str(CPU))) for kernel in lock.kernels]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """The installed versions the doctor sees: kernels 0.17.0, Transformers 5.22.2 accepting kernels 0.17.0-0.18."""
    versions: dict[str, str | None] = {"kernels": "0.17.0", "transformers": "5.22.2", "huggingface_hub": "2.4.0"}
    monkeypatch.setattr(doctor, "installed_version", lambda name: versions.get(name))
    monkeypatch.setattr(doctor, "installed_transformers", lambda: TransformersInfo(version=versions["transformers"], root=None))
    monkeypatch.setattr(doctor, "kernels_window", lambda: ("0.17.0", "0.18"))
    monkeypatch.delenv("HF_HUB_DISABLE_TELEMETRY", raising=False)
    monkeypatch.delenv("HF_HUB_USER_AGENT_ORIGIN", raising=False)
    return versions


def test_a_build_without_requirements_has_no_findings(hub: FakeHub, installed: dict) -> None:
    assert doctor.diagnose(entries(hub, f"{REPO}@v1"), "cpu") == []


def test_minver_beyond_the_supported_kernels_asks_for_an_older_build(hub: FakeHub, installed: dict,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "einops").mkdir()
    (tmp_path / "einops" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # einops importable: only the minver finding is left
    [finding] = doctor.diagnose(entries(hub, f"{REPO}@v2"), "cpu")
    assert finding.message == (f"{REPO}@v2 {CPU_VARIANT} needs kernels>=0.99.0, installed kernels 0.17.0; "
                               "this kernlock supports kernels>=0.16.2,<0.20")
    assert finding.fix == (f"lock a build of {REPO} that accepts kernels 0.16.2: kernlock lock {REPO}@<older revision>")


def test_minver_within_the_supported_kernels_names_the_pip_command(hub: FakeHub, installed: dict) -> None:
    [finding] = doctor.diagnose(entries(hub, f"{REPO}@v3"), "cpu")
    assert "needs kernels>=0.17.2, installed kernels 0.17.0" in finding.message
    assert finding.fix == "pip install 'kernels>=0.17.2,<0.18'" and finding.blocking
    installed["kernels"] = "0.17.2"
    assert doctor.diagnose(entries(hub, f"{REPO}@v3"), "cpu") == []


def test_a_missing_python_dependency_names_its_package(hub: FakeHub, installed: dict,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "einops", None)  # not importable here, whatever is installed
    findings = doctor.python_depends_findings(entries(hub, f"{REPO}@v2"), "cpu")
    assert [f.message for f in findings] == [
        f"{REPO}@v2 {CPU_VARIANT} needs Python package einops (import einops), which is not installed"]
    assert findings[0].fix == "pip install einops"


def test_a_free_threaded_interpreter_cannot_load_arch_builds(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    both = entries(hub, f"{REPO}@v1") + entries(hub, f"{REPO}@v4")
    assert [v.name for _, v in both] == [CPU_VARIANT, NOARCH_VARIANT]
    assert doctor.free_threaded_findings(both) == []
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    monkeypatch.setattr(sys, "version_info", VersionInfo(3, 14, 0, "final", 0))
    [finding] = doctor.free_threaded_findings(both)
    assert f"{REPO}@v1 {CPU_VARIANT} is an arch kernel; free-threaded Python" in finding.message
    monkeypatch.setattr(sys, "version_info", VersionInfo(3, 15, 0, "final", 0))
    assert doctor.free_threaded_findings(both) == []


@pytest.mark.parametrize(("environment", "hub_version", "found"), [
    ({"HF_HUB_DISABLE_TELEMETRY": "1"}, "2.4.0", True),
    ({"HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_USER_AGENT_ORIGIN": "kernlock"}, "2.4.0", False),
    ({"HF_HUB_DISABLE_TELEMETRY": "1"}, "1.10.0", False),
    ({}, "2.4.0", False),
])
def test_telemetry_off_warns_where_unlocked_requests_would_fail(hub: FakeHub, installed: dict,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                environment: dict, hub_version: str, found: bool) -> None:
    installed["huggingface_hub"] = hub_version
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    findings = doctor.diagnose(entries(hub, f"{REPO}@v1"), "cpu")
    assert [f.fix for f in findings] == (["export HF_HUB_USER_AGENT_ORIGIN=kernlock (or unset HF_HUB_DISABLE_TELEMETRY)"]
                                         if found else [])
    assert not any(f.blocking for f in findings)  # a warning: locked loads still work


def test_kernels_outside_the_transformers_window_comes_first(hub: FakeHub, installed: dict,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "kernels_window", lambda: ("0.20.0", "0.21.0"))  # a Transformers newer than kernlock
    findings = doctor.diagnose(entries(hub, f"{REPO}@v3"), "cpu")
    assert [f.fix for f in findings] == ["pip install 'transformers>=5.17,<5.26'", "pip install 'kernels>=0.17.2,<0.20'"]
    assert "kernels 0.17.0 is outside the window transformers 5.22.2 accepts (>=0.20.0,<0.21.0)" in findings[0].message
