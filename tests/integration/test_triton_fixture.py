"""The fixture attention kernel's Triton forward against SDPA (`gpu/check_triton.py`).

On a CPU it runs under Triton's interpreter (`TRITON_INTERPRET=1`, small shapes); on a
machine with CUDA it also runs compiled. Skipped when Triton is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT

ROOT = REPO_ROOT
pytest.importorskip("triton", reason="Triton is not installed (the Makefile installs it)")


def _check(device: str, tmp_path: Path, **env: str) -> dict:
    report = tmp_path / f"triton-{device}.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "gpu" / "check_triton.py"), "--device", device, "--json", str(report)],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=600,
    )
    assert report.exists(), completed.stdout + completed.stderr
    data = json.loads(report.read_text())
    failed = [case for case in data["cases"] if not case["ok"]]
    assert completed.returncode == 0 and not failed, json.dumps(failed, indent=1)[:4000]
    return data["summary"]


def test_triton_forward_matches_sdpa_under_the_interpreter(tmp_path: Path) -> None:
    summary = _check("cpu", tmp_path, TRITON_INTERPRET="1")
    assert summary["cases"] >= 20
    assert summary["max_rel_err_forward"] < 2e-2  # bf16 tolerance; float32 cases are ~1e-7
    assert summary["max_rel_err_backward"] < 4e-2


def test_triton_forward_matches_sdpa_on_cuda(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    summary = _check("cuda", tmp_path)
    assert summary["failed"] == 0
