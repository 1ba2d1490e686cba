"""Real-world cases: per-target overrides, renamed repos, the compatibility doctor, provenance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, CUDA_130, CUDA_X86, FA2, cli, make_project
from kernlock.environment import installed_version
from kernlock.lockfile_toml import load_lockfile
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub

OVERRIDE = f'''
[[tool.kernlock.overrides."{FA2}"]]
backend = "cu128"
revision = "v2"
reason = "v3+ fails in the GQA backward pass on CUDA 12.8"
'''

LOAD = """
import json, kernlock
kernlock.apply()
import kernels
names = {names!r}
print(json.dumps([kernels.get_kernel(name, **{kwargs!r}).KERNEL_IDENTITY for name in names]))
"""


def load(project: Path, names: list[str], env: dict[str, str] | None = None, **kwargs) -> list[dict]:
    out = subprocess.run([sys.executable, "-c", LOAD.format(names=names, kwargs=kwargs)], cwd=project,
                         capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- overrides


def test_override_sends_cu128_targets_to_v2_and_others_keep_the_default(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU, CUDA_X86, CUDA_130], extra=OVERRIDE)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    repo = hub.repo_path(FA2)
    assert lock.kernel(FA2, CUDA_X86).commit == rev_parse(repo, "v2")
    assert lock.kernel(FA2, CUDA_X86).override.reason.startswith("v3+ fails")
    assert lock.kernel(FA2, CPU).commit == lock.kernel(FA2, CUDA_130).commit == rev_parse(repo, "v4")
    assert lock.kernel(FA2, CPU).override is None
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0
    shown = cli("show", cwd=project).output
    assert "override backend=cu128: v3+ fails in the GQA backward pass" in shown
    explained = cli("explain", FA2, cwd=project).output
    assert "override for backend=cu128 → v2: v3+ fails" in explained

    # apply() on a simulated cu128 machine loads the v2 commit; on this CPU machine, v4.
    cu128 = load(project, [FA2], {"KERNLOCK_TARGET": CUDA_X86}, version=4)[0]
    assert (cu128["commit"], cu128["variant"]) == (rev_parse(repo, "v2"), "torch212-cxx11-cu128-x86_64-linux")
    here = load(project, [FA2], version=4)[0]
    assert (here["commit"], here["variant"]) == (rev_parse(repo, "v4"), "torch213-cxx11-cpu-x86_64-linux")

    # Changing the override makes the lock stale until it is re-locked.
    make_project(project, kernels=[FA2], targets=[CPU, CUDA_X86, CUDA_130], extra=OVERRIDE.replace('"v2"', '"v3"'))
    stale = cli("verify", "--all-targets", cwd=project)
    assert stale.exit_code == 1 and "override for kernels-community/flash-attn2 (backend=cu128 → v3) is not in the lock" in stale.output
    assert cli("lock", cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernel(FA2, CUDA_X86).commit == rev_parse(repo, "v3")


@pytest.mark.parametrize(("extra", "problem"), [
    (f'[tool.kernlock.overrides."{FA2}"]\nrevision = "v2"\nreason = "x"\n', "say which targets"),
    (f'[tool.kernlock.overrides."{FA2}"]\nbackend = "cu128"\nreason = "x"\n', "exactly one of version or revision"),
    (f'[tool.kernlock.overrides."{FA2}"]\nbackend = "cu128"\nversion = 2\n', "give a reason"),
    (f'[tool.kernlock.overrides."{FA2}"]\ntorch = ">>2"\nversion = 2\nreason = "x"\n', "not a version specifier"),
])
def test_bad_overrides_are_usage_errors(hub: TestHub, tmp_path: Path, extra: str, problem: str) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU], extra="\n" + extra)
    result = cli("lock", cwd=project)
    assert result.exit_code == 2 and problem in result.output


# ---------------------------------------------------------------- renamed repositories


def test_renamed_repo_is_locked_and_applied_under_both_names(hub: TestHub, tmp_path: Path) -> None:
    hub.renames["kernels-community/flash-attn"] = FA2
    project = make_project(tmp_path / "p", kernels=["kernels-community/flash-attn@v2"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert "kernels-community/flash-attn was renamed to kernels-community/flash-attn2" in result.output
    kernel = load_lockfile(project / "kernels.lock").kernels[0]
    assert (kernel.spec, kernel.repo, kernel.aliases) == ("kernels-community/flash-attn@v2", FA2, ("kernels-community/flash-attn",))
    assert kernel.commit == rev_parse(hub.repo_path(FA2), "v2")
    loaded = load(project, ["kernels-community/flash-attn", FA2], version=2)
    assert {item["commit"] for item in loaded} == {kernel.commit}
    remote = cli("verify", "--remote", cwd=project)
    assert remote.exit_code == 0 and "was renamed to kernels-community/flash-attn2 on the Hub" in remote.output
    outdated = cli("outdated", cwd=project)
    assert "renamed to kernels-community/flash-attn2" in outdated.output


# ---------------------------------------------------------------- compatibility doctor


def verify_doctor(project: Path, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-m", "kernlock", "verify", "--json"], cwd=project, capture_output=True,
                         text=True, env={**os.environ, **(env or {})}, timeout=60)
    report = json.loads(out.stdout)
    return next(check for check in report["checks"] if check["name"] == "doctor")


def fake_transformers(root: Path, low: str, high: str) -> Path:
    """A Transformers install whose accepted kernels window is [low, high)."""
    package = root / "transformers"
    (package / "utils").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "utils" / "import_utils.py").write_text(f'KERNELS_MIN_VERSION = "{low}"\nKERNELS_MAX_VERSION = "{high}"\n')
    (package / "modeling_flash_attention_utils.py").write_text("FLASH_ATTN_KERNEL_VERSIONS = {}\n")
    dist = root / "transformers-9.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 9.0.0\n")
    return root


def test_doctor_kernels_outside_transformers_window(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    assert verify_doctor(project)["ok"]
    fake = fake_transformers(tmp_path / "fake", "0.18.2", "0.20.0")
    path = os.pathsep.join(filter(None, (str(fake), os.environ.get("PYTHONPATH"))))  # keep this checkout's kernlock
    doctor = verify_doctor(project, {"PYTHONPATH": path})
    assert not doctor["ok"]
    problem = doctor["problems"][0]
    kernels = installed_version("kernels")
    assert f"kernels {kernels} is outside the window transformers 9.0.0 accepts (>=0.18.2,<0.20.0)" in problem["message"]
    assert "this kernlock supports kernels>=0.17.0,<0.18, which transformers>=5.18,<5.23 accepts" in problem["message"]
    assert problem["fix"] == "pip install 'transformers>=5.18,<5.23'"  # the installed 5.22.2 (no fake) passes above
    applied = subprocess.run([sys.executable, "-c", "import kernlock; kernlock.apply()"], cwd=project, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": path}, timeout=60)
    assert applied.returncode != 0 and "CompatibilityError" in applied.stderr and "outside the window" in applied.stderr


def test_doctor_minver_and_python_depends_then_fixed(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=["kernels-community/provenance@v2"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    problems = verify_doctor(project)["problems"]
    messages = [p["message"] for p in problems]
    assert any(f"needs kernels>=0.99.0, installed kernels {installed_version('kernels')}" in m for m in messages)
    [minver] = [p for p in problems if "0.99.0" in p["message"]]  # beyond kernels 0.17: an older build (run below)
    assert minver["fix"] == ("lock a build of kernels-community/provenance that accepts kernels 0.17.0: "
                             "kernlock lock kernels-community/provenance@<older revision>")
    assert any("needs Python package einops (import einops), which is not installed" in m for m in messages)
    stub = tmp_path / "stub"
    (stub / "einops").mkdir(parents=True)
    (stub / "einops" / "__init__.py").write_text("")
    path = os.pathsep.join(filter(None, (str(stub), os.environ.get("PYTHONPATH"))))  # keep this checkout's kernlock
    messages = [p["message"] for p in verify_doctor(project, {"PYTHONPATH": path})["problems"]]
    assert not any("einops" in m for m in messages) and any("kernels>=0.99.0" in m for m in messages)
    make_project(project, kernels=["kernels-community/provenance@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    assert verify_doctor(project)["ok"]


def test_doctor_free_threaded_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    import sysconfig

    from kernlock import doctor
    from kernlock.lockfile import LockedKernel, LockedVariant

    kernel = LockedKernel(spec="a/b", repo="a/b", commit="a" * 40, resolution="r", trust="allowlist")
    arch = LockedVariant(name="torch213-cxx11-cpu-x86_64-linux", targets=(CPU,), files=())
    noarch = LockedVariant(name="torch-universal", targets=(CPU,), files=())
    assert doctor.free_threaded_findings([(kernel, arch)]) == []
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    findings = doctor.free_threaded_findings([(kernel, arch), (kernel, noarch)])
    assert len(findings) == 1 and "free-threaded Python" in findings[0].message


def test_doctor_telemetry_disabled_and_kernlock_still_works(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    off = {"HF_HUB_DISABLE_TELEMETRY": "1"}
    for command in (["lock"], ["sync"]):
        out = subprocess.run([sys.executable, "-m", "kernlock", *command], cwd=project, capture_output=True, text=True,
                             env={**os.environ, **off}, timeout=60)
        assert out.returncode == 0, out.stderr
    doctor = verify_doctor(project, off)
    assert not doctor["ok"] and "HF_HUB_DISABLE_TELEMETRY=1" in doctor["problems"][0]["message"]
    assert "HF_HUB_USER_AGENT_ORIGIN" in doctor["problems"][0]["fix"]
    assert verify_doctor(project, {**off, "HF_HUB_USER_AGENT_ORIGIN": "kernlock"})["ok"]
    loaded = load(project, [FA2], off, version=2)[0]  # apply() works with telemetry off (a warning, not an error)
    assert loaded["commit"] == rev_parse(hub.repo_path(FA2), "v2")


# ---------------------------------------------------------------- provenance


def test_provenance_is_recorded_shown_and_dirty_builds_warned(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=["kernels-community/provenance@v1", "kernels-community/provenance@v2"],
                           targets=[CPU], extra='trust = []\n')
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    clean = lock.kernel("kernels-community/provenance@v1").variant_for(CPU)
    dirty = lock.kernel("kernels-community/provenance@v2").variant_for(CPU)
    assert clean.provenance.source_commit == "2" * 40 and clean.provenance.builder_version == "0.9.1"
    assert clean.digest == "sha256" and not clean.provenance.dirty
    assert dirty.provenance.source_dirty is True and dirty.kernels_minver == "0.99.0" and dirty.python_depends == ("einops",)
    shown = cli("show", "--provenance", cwd=project).output
    assert "source 222222222222; kernel-builder 0.9.1 111111111111; digest sha256" in shown
    assert "source 444444444444 (dirty)" in shown
    notes = verify_doctor(project)
    assert any("built from a dirty tree" in note for note in notes["notes"])
