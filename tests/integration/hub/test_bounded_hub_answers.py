"""Hostile Hub answers are bounded: huge listings and slow-drip headers end within the Hub deadline (issue 28)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ACTIVATION, CPU, LockedProjectFactory, cli, make_project
from kernlock.testing.hub import TestHub
from scripts.harness import child_env

pytestmark = pytest.mark.usefixtures("release_applied_lock")


CPU_VARIANT = "build/torch213-cxx11-cpu-x86_64-linux"


def _listing(count: int, size: int = 10) -> list[dict]:
    return [{"type": "file", "path": f"{CPU_VARIANT}/m{i}.py", "oid": "a" * 40, "size": size} for i in range(count)]


@pytest.mark.parametrize(
    ("listing", "headers", "problem"),
    [
        (_listing(1), "loop", "links back to a page it already sent"),
        (_listing(20_001), None, "has more than 20000 entries, more than kernlock accepts"),
        (_listing(1, size=1 << 30), None, "as a 1073741824-byte file stored in git (not LFS); kernlock reads at most"),
    ],
    ids=["self-linked pages", "100k entries", "huge git file"],
)
def test_hostile_listings_are_bounded(hub: TestHub, tmp_path: Path, listing, headers, problem: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    loop = f"{hub.url}/api/kernels/{ACTIVATION}/tree/loop"
    hub.add_fault("respond", match="/tree/", times=200, body=listing,
                  headers={"Link": f'<{loop}>; rel="next"'} if headers == "loop" else {})
    result = cli("lock", cwd=project)
    assert result.exit_code == 1 and problem in result.output, result.output
    assert hub.fired["respond"] <= 2 and not any("/resolve/" in path for _, path in hub.log)


@pytest.mark.parametrize("match", [r"/refs$", r"/tree/"])
@pytest.mark.slow
def test_header_slow_drip_is_bounded_by_the_hub_deadline(hub: TestHub, tmp_path: Path, monkeypatch, match: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    for name, value in {"HF_HUB_ETAG_TIMEOUT": "1", "KERNLOCK_HUB_DEADLINE": "2"}.items():
        monkeypatch.setenv(name, value)
    # a byte every 0.3 s, so no read timeout trips; for 15 s, so the old code fails instead of hanging
    hub.add_fault("drip-headers", match=match, times=3, interval=0.3, seconds=15)
    started = time.monotonic()
    result = cli("lock", cwd=project)
    elapsed = time.monotonic() - started
    assert hub.fired["drip-headers"] >= 1
    assert result.exit_code == 1 and elapsed < 2 + 6, (elapsed, result.output)  # the deadline, slack for a loaded machine
    assert "KERNLOCK_HUB_DEADLINE" in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("reader", ["sync", "cold apply()"])
@pytest.mark.slow
def test_header_slow_drip_on_a_download_is_bounded_by_the_hub_deadline(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch, reader: str
) -> None:
    """`sync` and `apply()` with a cold cache both download the locked files; the deadline bounds either."""
    project, _ = locked_project([f"{ACTIVATION}@v1"], targets=[CPU])
    monkeypatch.setenv("KERNLOCK_HUB_DEADLINE", "2")
    hub.add_fault("drip-headers", match=r"/resolve/", times=3, interval=0.3, seconds=15)
    started = time.monotonic()
    if reader == "sync":
        result = cli("sync", cwd=project)
        code, output, slack = result.exit_code, result.output, 6
    else:
        load = f"import kernels, kernlock\nkernlock.apply()\nkernels.get_kernel({ACTIVATION!r}, version=1)\n"
        out = subprocess.run([sys.executable, "-c", load], cwd=project, capture_output=True, text=True,
                             env=child_env(), timeout=120)
        code, output, slack = out.returncode, out.stderr, 10  # a process start on top
    elapsed = time.monotonic() - started
    assert hub.fired["drip-headers"] >= 1
    assert code == 1 and elapsed < 2 + slack, (elapsed, output[-3000:])
    assert "KERNLOCK_HUB_DEADLINE" in output, output[-3000:]
    if reader != "sync":
        assert "cannot be downloaded" in output, output[-3000:]
