"""Issue 28 item 9: a hostile or version-skewed rank record is one RankMismatchError, a bad timeout one
usage error naming the variable (issue 26: read by `kernlock._internal.settings`)."""

from __future__ import annotations

import json

import pytest

from kernlock._internal.runtime.rank_guard import (
    TIMEOUT_ENV,
    RankMismatchError,
    RankRecord,
    check_ranks,
)
from kernlock.errors import UsageError

pytestmark = pytest.mark.unit

RECORD = RankRecord(rank=0, host="h", lockfile="/p/kernels.lock", lock_digest="d" * 64, target="torch-cpu",
                    mixed_ok=False, kernels=(("s", "org/k", "c" * 40, "torch-cpu", "f" * 64),))


def test_a_record_from_a_newer_kernlock_with_an_extra_field_is_read() -> None:
    raw = json.loads(RECORD.to_bytes())
    assert RankRecord.from_bytes(json.dumps({**raw, "local_build": False}).encode()) == RECORD


@pytest.mark.parametrize("payload", [
    b"\xff\xfe", b"[" * 100000, b'{"version": 1, "rank": 0}', b"[1, 2]", b"null",
    json.dumps({**json.loads(RECORD.to_bytes()), "kernels": [["too", "short"]]}).encode(),
    json.dumps({**json.loads(RECORD.to_bytes()), "rank": "0"}).encode(),
    json.dumps({**json.loads(RECORD.to_bytes()), "version": 2}).encode(),
])
def test_a_hostile_record_is_a_rank_mismatch(payload: bytes) -> None:
    with pytest.raises(RankMismatchError, match="run the same kernlock version on every rank"):
        RankRecord.from_bytes(payload)


def test_a_bad_timeout_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from kernlock._internal.runtime import state

    lock = tmp_path / "kernels.lock"
    lock.write_text("")
    monkeypatch.setenv(TIMEOUT_ENV, "5m")
    # a stand-in binding: a lock of no kernels and the target as text (rank_record takes its text) are all it needs
    monkeypatch.setattr(state, "_binding", state.Binding(lock=type("L", (), {"kernels": []})(), path=lock, target="torch-cpu"))  # type: ignore[arg-type]
    monkeypatch.setenv("KERNLOCK_ALLOW_MIXED_VARIANTS", "0")
    with pytest.raises(UsageError, match=rf"^\${TIMEOUT_ENV}='5m' is not a number of seconds above 0; fix: "):
        check_ranks(store=None, rank=0, world_size=2)


def test_a_rank_loading_a_local_build_is_a_mismatch_blamed_on_local_kernels(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from types import SimpleNamespace

    from kernlock._internal.runtime.rank_guard import judge, rank_record

    variant = SimpleNamespace(name="torch-cpu", files=[])
    lock = SimpleNamespace(kernels=[SimpleNamespace(spec="org/k@v1", repo="org/k", commit="c" * 40,
                                                    variant_for=lambda target: variant)])
    path = tmp_path / "kernels.lock"
    path.write_text("")
    monkeypatch.setenv("KERNLOCK_ALLOW_MIXED_VARIANTS", "0")
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    hub_rank = rank_record(0, lock, path, "torch-cpu")  # type: ignore[arg-type]  # the stand-in lock above
    monkeypatch.setenv("LOCAL_KERNELS", f"org/k={tmp_path / 'build'}")
    local_rank = rank_record(1, lock, path, "torch-cpu")  # type: ignore[arg-type]  # the stand-in lock above
    verdict = judge([hub_rank, local_rank], 2)
    assert not verdict.ok and "rank(s) 1 load a local build of org/k@v1 (LOCAL_KERNELS) while other ranks" in verdict.table
    assert "per-target overrides" not in verdict.table  # was: blamed overrides the project does not have
    assert "fix: set the same LOCAL_KERNELS on every rank" in verdict.table
    assert f"local build {tmp_path / 'build'}" in verdict.table, verdict.table
