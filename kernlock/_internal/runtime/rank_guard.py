"""Cross-rank identity guard: every rank of a torch.distributed job binds the same kernel builds.

When a process group is initialised in a process where the lock is applied,
each rank publishes one small record through the process group's own
key-value store: the digest of its lock's bytes, its target and, for every
locked kernel, (repo, commit, variant, files digest) — exactly what the locked
loader will let it load. One `set` and one `multi_get` per rank, no tensors:
the same with gloo and NCCL, and no device needed. Every rank then judges all
records the same way; on a mismatch every rank raises `RankMismatchError` from
`init_process_group`, before any training step, and rank 0's error holds the
table (which ranks and hosts bind what, and the fix).

Ranks whose nodes need other variants of the same commit (cu128 and cu130
nodes, say) pass only when every rank opted in, with
`[tool.kernlock] allow-mixed-variants = true` in the lock's project or
`KERNLOCK_ALLOW_MIXED_VARIANTS=1`; the table is logged either way.
`KERNLOCK_RANK_CHECK=0` switches the guard off. `kernlock._internal.runtime.rank_hook` runs the
guard from torch.distributed and imports this module only then.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import socket
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.settings import MIXED_ENV, flag, seconds, text
from kernlock._internal.settings import RANK_CHECK_ENV as CHECK_ENV
from kernlock._internal.settings import RANK_CHECK_TIMEOUT_ENV as TIMEOUT_ENV
from kernlock.errors import RankMismatchError

logger = logging.getLogger("kernlock")

RECORD_VERSION = 1
LOCAL_BUILD = "local build"  # the commit a rank records for a kernel that LOCAL_KERNELS replaces
_rounds = itertools.count()  # every rank initialises its process groups in the same order


@dataclass(frozen=True)
class RankRecord:
    """What one rank binds: its lock, target and (spec, repo, commit, variant, files digest) per
    kernel."""

    rank: int
    host: str
    lockfile: str
    lock_digest: str
    target: str
    mixed_ok: bool
    kernels: tuple[tuple[str, str, str, str, str], ...]

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"version": RECORD_VERSION, **asdict(self)}, separators=(",", ":")
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RankRecord:
        """Parse strictly, ignoring unknown fields (a newer kernlock); anything else is a
        `RankMismatchError`."""
        try:
            raw = json.loads(data.decode())
            if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
                raise ValueError(
                    f"record version {raw.get('version') if isinstance(raw, dict) else None!r}"
                )
            fields = {name: raw[name] for name in cls.__dataclass_fields__}
            kernels = tuple(tuple(k) for k in fields["kernels"])
            if (
                not all(len(k) == 5 and all(isinstance(x, str) for x in k) for k in kernels)
                or not all(
                    isinstance(fields[n], str)
                    for n in ("host", "lockfile", "lock_digest", "target")
                )
                or type(fields["rank"]) is not int
                or type(fields["mixed_ok"]) is not bool
            ):
                raise ValueError("a field of the wrong type")
        # UnicodeDecodeError is a ValueError
        except (
            ValueError,
            KeyError,
            TypeError,
            RecursionError,
        ) as error:
            raise RankMismatchError(
                f"a rank sent a record this kernlock cannot read ({type(error).__name__}: "
                f"{str(error)[:80]})",
                fix="run the same kernlock version on every rank",
            ) from None
        return cls(**{**fields, "kernels": kernels})

    def binding(self) -> tuple[str, tuple[tuple[str, str, str, str, str], ...]]:
        return self.lock_digest, self.kernels


@dataclass(frozen=True)
class Verdict:
    """The judgement every rank reaches from all records."""

    ok: bool
    agree: bool
    table: str  # the report: the problem, the table, then `fix:` on a line of its own
    # the problem and the table, for `RankMismatchError`, which keeps the fix apart
    problem: str = ""
    fix: str = ""


def files_digest(files: Any) -> str:
    """sha256 over a variant's locked (path, sha256, size) entries."""
    digest = hashlib.sha256()
    for locked in sorted(files, key=lambda f: f.path):
        digest.update(f"{locked.path}\0{locked.sha256}\0{locked.size}\n".encode())
    return digest.hexdigest()


def rank_record(rank: int, lock: Lockfile, lockfile: Path, target: str) -> RankRecord:
    """This rank's record for the applied `lock` (read from `lockfile`) on `target`.

    A kernel that `LOCAL_KERNELS` replaces is recorded as a local build (its path), not as the
    locked commit.
    """
    from kernlock._internal.project import local_kernels

    local = local_kernels.overrides()
    kernels = tuple(
        sorted(
            (entry.spec, entry.repo, LOCAL_BUILD, str(local[entry.repo]), "")
            if entry.repo in local
            else (entry.spec, entry.repo, entry.commit, variant.name, files_digest(variant.files))
            for entry in lock.kernels
            if (variant := entry.variant_for(target)) is not None
        )
    )
    return RankRecord(
        rank=rank,
        host=socket.gethostname(),
        lockfile=str(lockfile),
        lock_digest=hashlib.sha256(lockfile.read_bytes()).hexdigest(),
        target=target,
        mixed_ok=mixed_variants_allowed(lockfile),
        kernels=kernels,
    )


def mixed_variants_allowed(lockfile: Path) -> bool:
    """`$KERNLOCK_ALLOW_MIXED_VARIANTS`, else `[tool.kernlock] allow-mixed-variants` of the lock's
    project.

    The project is found as every command finds it (the nearest root at or above the lock), so a
    configured `lockfile = "locks/k.lock"` still reads the project's setting.
    """
    if text(MIXED_ENV) is not None:
        return flag(MIXED_ENV, False)
    from kernlock._internal.project.config import find_project_root, load_project

    return load_project(
        find_project_root(lockfile.parent)
    ).allow_mixed_variants  # the default without a pyproject.toml


def judge(records: list[RankRecord], world_size: int) -> Verdict:
    """Compare every rank's record; all ranks reach the same verdict from the same records."""
    missing = sorted(set(range(world_size)) - {r.rank for r in records})
    bindings = {r.binding() for r in records}
    if not missing and len(bindings) == 1:
        return Verdict(ok=True, agree=True, table="")
    table = _table(records)
    if missing:
        problem = f"rank(s) {_ranges(missing)} did not report within the time limit"
        fix = (
            "start every rank under `kernlock run` (or export KERNLOCK_APPLY=1 and "
            "KERNLOCK_LOCKFILE in the job script) so that every rank applies the lock; "
            f"${TIMEOUT_ENV} sets the wait in seconds"
        )
        return _verdict(problem, table, fix)
    locks = {(r.lock_digest, r.lockfile) for r in records}
    if len({digest for digest, _ in locks}) > 1:
        read = "; ".join(
            f"{path} ({digest[:12]})" for digest, path in sorted(locks, key=lambda x: x[1])
        )
        problem = "ranks read different lock files"
        fix = (
            f"every rank must read the same kernels.lock (read: {read}); put one lock on shared "
            "storage and point KERNLOCK_LOCKFILE at it, or ship a `kernlock vendor` directory "
            "(KERNLOCK_VENDOR_DIR)"
        )
        return _verdict(problem, table, fix)
    commits: dict[str, set[str]] = {}
    for record in records:
        for spec, _, commit, _, _ in record.kernels:
            commits.setdefault(spec, set()).add(commit)
    split = sorted(spec for spec, seen in commits.items() if len(seen) > 1)
    targets = ", ".join(sorted({r.target for r in records}))
    local = sorted(spec for spec in split if LOCAL_BUILD in commits[spec])
    if local:  # LOCAL_KERNELS on some ranks, not a per-target override
        ranks = _ranges(
            sorted(
                {
                    r.rank
                    for r in records
                    for k in r.kernels
                    if k[0] in local and k[2] == LOCAL_BUILD
                }
            )
        )
        problem = (
            f"rank(s) {ranks} load a local build of {', '.join(local)} (LOCAL_KERNELS) while other "
            "ranks load the locked commit"
        )
        fix = (
            "set the same LOCAL_KERNELS on every rank, or unset it on every rank to load the "
            "locked commits"
        )
        return _verdict(problem, table, fix)
    if split:
        problem = (
            f"ranks bind different commits of {', '.join(split)} (per-target overrides on targets "
            f"{targets})"
        )
        fix = (
            "run the job on nodes of one target, or drop the override so one commit covers every "
            "target"
        )
        return _verdict(problem, table, fix)
    if all(r.mixed_ok for r in records):
        return Verdict(
            True,
            False,
            _report(
                "ranks load different variants of the same commits (allowed: allow-mixed-variants)",
                table,
                "",
            ),
        )
    problem = f"ranks load different build variants of the same commits (targets {targets})"
    fix = (
        "run every rank on the same Torch/CUDA build; if the nodes really need different builds "
        "of these commits, set `allow-mixed-variants = true` in [tool.kernlock] (or "
        f"{MIXED_ENV}=1) on every rank"
    )
    return _verdict(problem, table, fix)


def _verdict(problem: str, table: str, fix: str) -> Verdict:
    return Verdict(
        False, False, _report(problem, table, fix), problem=f"{problem}:\n{table}", fix=fix
    )


def _report(problem: str, table: str, fix: str) -> str:
    return f"{problem}:\n{table}" + (f"\nfix: {fix}" if fix else "")


def _ranges(ranks: list[int]) -> str:
    """`0-3,7`: compact rank lists."""
    parts = []
    for _, run in itertools.groupby(enumerate(sorted(ranks)), key=lambda pair: pair[1] - pair[0]):
        values = [rank for _, rank in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(parts)


def _table(records: list[RankRecord]) -> str:
    """One row per distinct binding: ranks, hosts, lock, target, then commit and variant of each
    kernel."""
    specs = sorted({k[0] for r in records for k in r.kernels})
    groups: dict[tuple, list[RankRecord]] = {}
    for record in sorted(records, key=lambda r: r.rank):
        groups.setdefault((record.lock_digest, record.target, record.kernels), []).append(record)
    header = ["ranks", "hosts", "lock", "target", *specs]
    rows = [header]
    for (digest, target, kernels), members in groups.items():
        by_spec = {k[0]: f"{k[2][:12]} {k[3]}" for k in kernels}
        hosts = sorted({m.host for m in members})
        rows.append(
            [
                _ranges([m.rank for m in members]),
                ",".join(hosts[:3]) + ("…" if len(hosts) > 3 else ""),
                f"{digest[:12]} {members[0].lockfile}",
                target,
                *(by_spec.get(spec, "-") for spec in specs),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    )


# ---------------------------------------------------------------- the exchange


def exchange(
    store: Any, rank: int, world_size: int, payload: bytes, timeout: float
) -> list[bytes | None]:
    """Publish `payload` under this rank's key and read every rank's (None for ranks that never
    wrote one).

    No rank returns before every rank that published has read: the store's host (rank 0 under an
    env:// rendezvous) may exit right after a failed check, and a rank still reading would then lose
    the store ("Connection reset by peer") instead of raising its own one-line error.
    """
    prefix = f"kernlock/rank-check/{next(_rounds)}/"
    keys = [f"{prefix}{r}" for r in range(world_size)]
    store.set(keys[rank], payload)
    try:
        store.wait(keys, timedelta(seconds=timeout))
        values: list[bytes | None] = [bytes(value) for value in store.multi_get(keys)]
    except RuntimeError:  # DistStoreError: some rank never published
        values = [bytes(store.get(key)) if store.check([key]) else None for key in keys]
    store.set(f"{prefix}read/{rank}", b"1")
    readers = [f"{prefix}read/{r}" for r, value in enumerate(values) if value is not None]
    # a rank died between publishing and reading: nothing left to wait for
    with contextlib.suppress(RuntimeError):
        store.wait(readers, timedelta(seconds=timeout))
    return values


def check_ranks(store: Any, rank: int, world_size: int) -> Verdict | None:
    """Run the guard over `store` for this rank; raise `RankMismatchError` on a mismatch.

    Returns None when there is nothing to check (guard off, no lock applied, one rank).
    """
    from kernlock._internal.runtime.state import binding

    if not flag(CHECK_ENV, True) or world_size < 2:
        return None
    bound = binding()
    if bound is None:
        return None
    lock, path, target = bound.lock, bound.path, bound.target
    record = rank_record(rank, lock, path, str(target))
    timeout = seconds(TIMEOUT_ENV, 300.0)
    records = [
        RankRecord.from_bytes(raw)
        for raw in exchange(store, rank, world_size, record.to_bytes(), timeout)
        if raw
    ]
    verdict = judge(records, world_size)
    if verdict.ok and verdict.agree:
        kernels = ", ".join(
            f"{spec}@{commit[:12]} [{variant}]" for spec, _, commit, variant, _ in record.kernels
        )
        logger.info(
            "kernlock: rank %d/%d: all ranks bind %s (%s): %s",
            rank,
            world_size,
            path,
            record.lock_digest[:12],
            kernels or "no kernels",
        )
    elif verdict.ok:
        if rank == 0:
            logger.warning("kernlock: %s", verdict.table)
    else:
        raise RankMismatchError(
            verdict.problem
            if rank == 0
            else f"rank {rank} stops: the ranks of this job disagree on kernel builds "
            "(rank 0's error shows the table)",
            fix=verdict.fix,
        )
    return verdict


# ---------------------------------------------------------------- bound or native, per layer


def _layer_cell(row: dict[str, str]) -> str:
    if "native" in row:
        return f"native ({row['native']})"
    return f"{row.get('repo', '?')}@{row.get('commit', '')[:12]} {row.get('variant', '')}".strip()


def check_layer_ranks(store: Any, rank: int, world_size: int, layers: list[dict[str, str]]) -> None:
    """After a kernelize: every rank runs each layer with the same kernel build, or natively on
    all of them; else every rank raises `RankMismatchError`, rank 0's with the table by layer."""
    if not flag(CHECK_ENV, True) or world_size < 2:
        return
    payload = json.dumps(layers, sort_keys=True).encode()
    timeout = seconds(TIMEOUT_ENV, 300.0)
    tables = {
        r: tuple(json.loads(raw)) if raw else None
        for r, raw in enumerate(exchange(store, rank, world_size, payload, timeout))
    }
    distinct = {json.dumps(t, sort_keys=True) for t in tables.values()}
    if len(distinct) <= 1:
        return
    cells = {r: {row["layer"]: _layer_cell(row) for row in t or ()} for r, t in tables.items()}
    names = sorted({name for by_layer in cells.values() for name in by_layer})
    differing = [n for n in names if len({c.get(n, "-") for c in cells.values()}) > 1]
    groups: dict[tuple[str, ...], list[int]] = {}
    for r, by_layer in sorted(cells.items()):
        groups.setdefault(tuple(by_layer.get(n, "-") for n in differing), []).append(r)
    rows = [["ranks", *differing]] + [[_ranges(rs), *key] for key, rs in groups.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    )
    problem = (
        f"the ranks of this job run {', '.join(differing)} differently (a locked kernel on some, "
        "Transformers' own code on others)"
    )
    fix = "run `kernlock sync` on every node (a cold cache is the usual cause), then restart"
    raise RankMismatchError(
        f"{problem}:\n{table}"
        if rank == 0
        else f"rank {rank} stops: the ranks of this job run layers differently (rank 0's error "
        "shows the table)",
        fix=fix,
    )
