"""Why a re-lock changed an entry (`kernlock._internal.resolve.changes.lock_changes`), for the reasons the Hub fixtures cannot stage."""

from __future__ import annotations

from dataclasses import replace

from kernlock._internal.lockfile.entries import LockedKernel, Lockfile, Override

BARE = LockedKernel(spec="org/fa", repo="org/fa", version=3, ref="v3", commit="a" * 40,
                    resolution="default of transformers 5.19.0 on torch 2.13", trust="allowlist")
PINNED = replace(BARE, override=Override(when="backend=cu128", use="v2", reason="GQA backward"), version=2, ref="v2",
                 commit="b" * 40)


def changes(old: tuple[LockedKernel, ...], new: tuple[LockedKernel, ...]) -> list[tuple[str | None, str]]:
    from kernlock._internal.resolve.changes import lock_changes

    before, after = (Lockfile(targets=(), inputs=("org/fa",), kernels=k) for k in (old, new))
    return [(change.override, change.reason) for change in lock_changes(before, after)]


def test_another_version_of_a_bare_spec_is_an_upgrade() -> None:
    upgraded = replace(BARE, version=4, ref="v4", commit="c" * 40)
    assert changes((BARE, PINNED), (upgraded, PINNED)) == [(None, "upgraded")]


def test_a_changed_override_pin_is_the_overrides_doing() -> None:
    repinned = replace(PINNED, override=replace(PINNED.override, use="v1"), version=1, ref="v1", commit="d" * 40)
    assert changes((BARE, PINNED), (BARE, repinned)) == [("backend=cu128", "override")]
    assert changes((BARE,), (BARE, PINNED)) == [("backend=cu128", "override")]
    assert changes((BARE, PINNED), (BARE,)) == [("backend=cu128", "override")]


def test_an_unchanged_commit_is_no_change() -> None:
    assert changes((BARE, PINNED), (replace(BARE, resolution="default of transformers 5.22.2 on torch 2.13"), PINNED)) == []
