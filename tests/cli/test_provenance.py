"""Build provenance from kernel-builder's metadata: recorded in the lock, shown, and dirty builds noted."""

from __future__ import annotations

from helpers import CPU, PROVENANCE, LockedProjectFactory, cli
from scripts.harness import verify_doctor


def test_provenance_is_recorded_shown_and_dirty_builds_warned(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{PROVENANCE}@v1", f"{PROVENANCE}@v2"], [CPU], extra="trust = []\n")
    clean = lock.kernel(f"{PROVENANCE}@v1").variant_for(CPU)
    dirty = lock.kernel(f"{PROVENANCE}@v2").variant_for(CPU)
    assert clean.provenance.source_commit == "2" * 40 and clean.provenance.builder_version == "0.9.1"
    assert clean.digest == "sha256" and not clean.provenance.dirty
    assert dirty.provenance.source_dirty is True and dirty.kernels_minver == "0.99.0" and dirty.python_depends == ("einops",)
    shown = cli("show", "--provenance", cwd=project).output
    assert "source 222222222222; kernel-builder 0.9.1 111111111111; digest sha256" in shown
    assert "source 444444444444 (dirty)" in shown
    notes = verify_doctor(project)
    assert any("built from a dirty tree" in note for note in notes["notes"])
