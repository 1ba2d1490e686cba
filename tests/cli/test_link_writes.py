"""Nothing is written through a link (issue 44, classes 2 and 7): in a shared vendor directory a
group member may plant `kernels.lock`, `.kernlock-vendor` or `kernels--org--repo` as links to the
victim's files; in a shared `output_dir`, `kernlock.json`. kernlock refuses each with one line and
leaves the link's target as it was (`kernlock._internal.fs.inside`)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import CPU, UNIVERSAL, LockedProjectFactory, cli
from kernlock.errors import WriteError

BASHRC = "export PATH=$HOME/bin:$PATH\n"


def _one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


@pytest.mark.parametrize("name", ["kernels.lock", ".kernlock-vendor"])
def test_vendor_never_replaces_a_file_a_link_in_its_directory_points_at(
        locked_project: LockedProjectFactory, tmp_path: Path, name: str) -> None:
    project = locked_project([f"{UNIVERSAL}@v1"], [CPU]).path
    shared, victim = tmp_path / "shared", tmp_path / "home" / ".bashrc"
    shared.mkdir()
    victim.parent.mkdir()
    victim.write_text(BASHRC)
    (shared / name).symlink_to(victim)
    refused = cli("vendor", str(shared), cwd=project)
    line = _one_line(refused.output)
    assert refused.exit_code != 0
    assert f"refusing to write through {shared / name}: it is a symbolic link (to {victim})" in line, line
    assert "; fix: " in line
    assert victim.read_text() == BASHRC and (shared / name).is_symlink()


def test_vendor_never_copies_kernel_files_through_a_linked_repo_directory(
        locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([f"{UNIVERSAL}@v1"], [CPU]).path
    shared, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    shared.mkdir()
    elsewhere.mkdir()
    planted = shared / ("kernels--" + UNIVERSAL.replace("/", "--"))
    planted.symlink_to(elsewhere, target_is_directory=True)
    refused = cli("vendor", str(shared), cwd=project)
    line = _one_line(refused.output)
    assert refused.exit_code != 0 and f"refusing to write through {planted}: it is a symbolic link" in line, line
    assert list(elsewhere.iterdir()) == []
    assert not any(p.name.startswith(".staging-") for p in shared.iterdir())  # nothing half-written left
    fresh = cli("vendor", str(tmp_path / "mine"), cwd=project)  # the fix: a directory only you change
    assert fresh.exit_code == 0, fresh.output


def test_a_linked_run_record_in_a_checkpoint_is_refused_and_the_run_goes_on(tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    from transformers import TrainerCallback

    from kernlock._internal.runtime.trainer_record import _callback_class, write_record

    record = {"kernels": [], "target": CPU}
    victim = tmp_path / "victim.json"
    victim.write_text("{}\n")
    checkpoint = tmp_path / "out" / "checkpoint-1"
    checkpoint.mkdir(parents=True)
    (checkpoint / "kernlock.json").symlink_to(victim)
    with pytest.raises(WriteError, match="is a symbolic link"):
        write_record(checkpoint, record)
    callback = _callback_class(TrainerCallback, lambda: record)()
    with caplog.at_level(logging.WARNING, logger="kernlock"):
        callback.on_save(SimpleNamespace(output_dir=str(tmp_path / "out")),
                         SimpleNamespace(is_world_process_zero=True, global_step=1), None)
    assert "kernlock: run record not written: refusing to write through" in caplog.text
    assert victim.read_text() == "{}\n"
    (checkpoint / "kernlock.json").unlink()
    assert write_record(checkpoint, record) and (checkpoint / "kernlock.json").read_text().startswith("{")


def test_a_link_planted_as_a_download_lock_is_named_not_called_a_network_failure(
        locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    """Issue 44, class 12: the per-file lock in a shared cache's `.locks/` planted as a link."""
    import os
    import subprocess
    import sys

    from kernlock._internal.fetch.download_lock import file_lock_name
    from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder

    project, lock = locked_project([f"{UNIVERSAL}@v1"], [CPU])
    [kernel] = lock.kernels
    variant = kernel.variant_for(lock.targets[0])
    assert variant is not None
    locks = hub_cache_dir() / ".locks" / repo_folder(kernel.repo)
    locks.mkdir(parents=True, exist_ok=True)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for locked in variant.files:
        (locks / file_lock_name(kernel.commit, variant.name, locked.path)).symlink_to(victim)
    refused = cli("sync", cwd=project)
    line = _one_line(refused.output)
    assert refused.exit_code != 0 and "is a symbolic link (to " in line and "nothing was downloaded" in line, line
    assert "network" not in line and "HF_ENDPOINT" not in line, line  # was: "check HF_ENDPOINT, your network"
    assert victim.read_text() == "precious\n"
    fix = line.split("meanwhile use a cache only you write: ", 1)[1]
    kernlock_bin = Path(sys.executable).parent
    done = subprocess.run(fix, shell=True, cwd=project, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp_path / "home"),
                               "PATH": f"{kernlock_bin}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr  # the printed fix, run as printed
    assert (tmp_path / "home" / ".cache" / "kernlock-hub").is_dir()
