"""The fixture attention kernel's Triton forward against SDPA under Triton's interpreter
(`tests/gpu/check_triton.py`, `TRITON_INTERPRET=1`, small shapes); tests/gpu/test_triton_cuda.py
runs the same check compiled on a GPU. Skipped when Triton is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT

pytest.importorskip("triton", reason="Triton is not installed (the Makefile installs it)")


@pytest.mark.slow
def test_triton_forward_matches_sdpa_under_the_interpreter(tmp_path: Path) -> None:
    report = tmp_path / "triton-cpu.json"
    script = REPO_ROOT / "tests" / "gpu" / "check_triton.py"
    completed = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--json", str(report)],
        env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600,
    )
    assert report.exists(), completed.stdout + completed.stderr
    data = json.loads(report.read_text())
    failed = [case for case in data["cases"] if not case["ok"]]
    assert completed.returncode == 0 and not failed, json.dumps(failed, indent=1)[:4000]
    summary = data["summary"]
    assert summary["cases"] >= 20
    assert summary["max_rel_err_forward"] < 2e-2  # bf16 tolerance; float32 cases are ~1e-7
    assert summary["max_rel_err_backward"] < 4e-2
