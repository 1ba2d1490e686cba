"""The threat model (docs/explanation/threat-model.md) states what kernlock does not cover (issue 28 item 18)."""

from __future__ import annotations

from helpers import REPO_ROOT


def test_the_threat_model_states_what_is_not_covered() -> None:
    model = (REPO_ROOT / "docs" / "explanation" / "threat-model.md").read_text()
    covered, not_covered = model.split("What it does not protect against:", 1)
    assert 'PathFinder.find_spec("kernels")' in not_covered and "exec_module" in not_covered  # item 19: out of scope
    assert "a window of microseconds" not in model  # sources are hashed as they are read (tests/runtime/test_import_time_refusals.py)
    assert "hashed against the lock as they are read" in covered
    for launch in ("`subprocess`", "`os.exec*`", "`os.posix_spawn*`", "`python -E`, `-I`, `-S`"):
        assert launch in covered, launch
