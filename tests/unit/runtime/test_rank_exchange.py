"""The cross-rank guard's store exchange, with threads as ranks over torch's in-process store."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import timedelta

import pytest
from torch.distributed import HashStore

from kernlock._internal.runtime import rank_guard as distributed
from kernlock._internal.runtime.rank_guard import exchange


@pytest.fixture(autouse=True)
def one_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads share the process's round counter; real ranks each count their own process groups."""
    monkeypatch.setattr(distributed, "_rounds", itertools.repeat(0))


class SlowReader:
    """Rank 1's view of the store: its reads start late, as on a loaded node."""

    def __init__(self, store: HashStore, events: list[str]) -> None:
        self.store, self.events = store, events

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        time.sleep(0.3)
        values = self.store.multi_get(keys)
        self.events.append("rank 1 read")
        return values


def test_no_rank_returns_before_every_rank_has_read() -> None:
    """Rank 0 hosts the store under env://: returning (and exiting on a mismatch) early drops rank 1's read."""
    store, events, results = HashStore(), [], {}
    store.set_timeout(timedelta(seconds=10))

    def rank(index: int, view) -> None:
        results[index] = exchange(view, index, 2, f"record {index}".encode(), timeout=10)
        events.append(f"rank {index} returned")

    ranks = [threading.Thread(target=rank, args=(0, store)),
             threading.Thread(target=rank, args=(1, SlowReader(store, events)))]
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join(timeout=30)
    assert results == {0: [b"record 0", b"record 1"], 1: [b"record 0", b"record 1"]}
    assert events.index("rank 1 read") < events.index("rank 0 returned"), events


def test_a_rank_that_never_publishes_is_none_after_the_wait() -> None:
    store = HashStore()
    assert exchange(store, 0, 2, b"only rank 0", timeout=0.2) == [b"only rank 0", None]
