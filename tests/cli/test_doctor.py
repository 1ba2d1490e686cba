"""The compatibility doctor end to end: `verify --json` in a fresh process, against real and stand-in installs.

The doctor's rules on their own are unit tests (tests/unit/check/test_doctor_findings.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import CPU, FA2, PROVENANCE, LockedProjectFactory, cli, make_project, run_kernlock
from kernlock._internal.compat.kernels_api import line
from kernlock._internal.host import installed_version
from kernlock._internal.rules.doctor import SUPPORTED_KERNELS, SUPPORTED_TRANSFORMERS
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub
from scripts.harness import load_identities, verify_doctor


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


def test_doctor_kernels_outside_transformers_window(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    assert verify_doctor(project)["ok"]
    fake = fake_transformers(tmp_path / "fake", "0.20.0", "0.21.0")  # a Transformers that wants a kernels from after kernlock
    path = os.pathsep.join(filter(None, (str(fake), os.environ.get("PYTHONPATH"))))  # keep this checkout's kernlock
    doctor = verify_doctor(project, {"PYTHONPATH": path})
    assert not doctor["ok"]
    problem = doctor["problems"][0]
    kernels = installed_version("kernels")
    assert f"kernels {kernels} is outside the window transformers 9.0.0 accepts (>=0.20.0,<0.21.0)" in problem["message"]
    (low, high), (t_low, t_high) = SUPPORTED_KERNELS, SUPPORTED_TRANSFORMERS
    assert f"this kernlock supports kernels>={low},<{high}, which transformers>={t_low},<{t_high} accepts" in problem["message"]
    assert problem["fix"] == f"pip install 'transformers>={t_low},<{t_high}'"  # the installed Transformers (no fake) passes above
    applied = subprocess.run([sys.executable, "-c", "import kernlock; kernlock.apply()"], cwd=project, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": path}, timeout=60)
    assert applied.returncode != 0 and "CompatibilityError" in applied.stderr and "outside the window" in applied.stderr


def test_doctor_minver_and_python_depends_then_fixed(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([f"{PROVENANCE}@v2"], [CPU]).path
    problems = verify_doctor(project)["problems"]
    messages = [p["message"] for p in problems]
    assert any(f"needs kernels>=0.99.0, installed kernels {installed_version('kernels')}" in m for m in messages)
    [minver] = [p for p in problems if "0.99.0" in p["message"]]  # beyond kernels 0.17: an older build (run below)
    assert minver["fix"] == (f"lock a build of kernels-community/provenance that accepts kernels {SUPPORTED_KERNELS[0]}: "
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


def test_doctor_telemetry_disabled_and_kernlock_still_works(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    off = {"HF_HUB_DISABLE_TELEMETRY": "1"}
    for command in (["lock"], ["sync"]):
        out = subprocess.run([sys.executable, "-m", "kernlock", *command], cwd=project, capture_output=True, text=True,
                             env={**os.environ, **off}, timeout=60)
        assert out.returncode == 0, out.stderr
    doctor = verify_doctor(project, off)
    if line().FIRST > (0, 17):  # kernels 0.18 builds its user agent without the empty header
        assert doctor["ok"], doctor
        return
    assert not doctor["ok"] and "HF_HUB_DISABLE_TELEMETRY=1" in doctor["problems"][0]["message"]
    assert "HF_HUB_USER_AGENT_ORIGIN" in doctor["problems"][0]["fix"]
    assert verify_doctor(project, {**off, "HF_HUB_USER_AGENT_ORIGIN": "kernlock"})["ok"]
    loaded = load_identities(project, [FA2], off, version=2)[0]  # apply() works with telemetry off (a warning, not an error)
    assert loaded["commit"] == rev_parse(hub.repo_path(FA2), "v2")


def test_a_lock_written_where_the_doctor_refuses_warns(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    plain = run_kernlock("lock", cwd=project)
    assert plain.returncode == 0 and "doctor" not in plain.stderr, plain.stderr
    fake = fake_transformers(tmp_path / "fake", "0.20.0", "0.21.0")
    path = os.pathsep.join(filter(None, (str(fake), os.environ.get("PYTHONPATH"))))  # keep this checkout's kernlock
    relock = run_kernlock("lock", "-U", cwd=project, env={"PYTHONPATH": path})
    assert relock.returncode == 0, relock.stderr
    [warning] = [line for line in relock.stderr.splitlines() if "doctor" in line]
    assert warning.startswith("kernlock: warning: locked from an environment the compatibility doctor rejects")
    assert "outside the window transformers 9.0.0 accepts" in warning
    assert warning.endswith("fix: pip install 'transformers>={},<{}'".format(*SUPPORTED_TRANSFORMERS))
    assert not verify_doctor(project, {"PYTHONPATH": path})["ok"]  # what the warning says `verify` does there
