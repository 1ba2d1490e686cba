"""The hook that runs the cross-rank guard (`kernlock._internal.runtime.rank_guard`) when
torch.distributed starts a job.

`import torch` already imports `torch.distributed.distributed_c10d`, so `apply()`
installs this hook in every process. It is kept apart from the guard so that
`apply()` stays cheap: `kernlock._internal.runtime.rank_guard` is imported only when a default
process group is actually installed (at `init_process_group`, or by `apply()`
when one already exists).
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

logger = logging.getLogger("kernlock")


def patch_c10d(module: ModuleType) -> None:
    """Run the guard whenever `torch.distributed.distributed_c10d` installs a default process
    group."""
    original = getattr(module, "_update_default_pg", None)
    if original is None:
        logger.warning(
            "kernlock: this torch has no distributed_c10d._update_default_pg; the rank check is off"
        )
        return

    def _update_default_pg(pg: Any) -> None:
        original(pg)
        if pg is not None:
            _check_group(module, pg)

    setattr(module, "_update_default_pg", _update_default_pg)  # noqa: B010 (a ModuleType: no attribute to type-check)


def check_initialised() -> None:
    """Run the guard now if a default process group already exists (lock applied after
    init_process_group)."""
    import sys

    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is not None and c10d.is_initialized():
        _check_group(c10d, c10d._get_default_group())


def _check_group(c10d: ModuleType, pg: Any) -> None:
    from kernlock._internal.runtime import rank_guard as distributed

    distributed.check_ranks(c10d._world.pg_map[pg][1], pg.rank(), pg.size())


def check_layers(layers: list[dict[str, str]]) -> None:
    """Compare this rank's kernelized layers with every other rank's, when a job is running."""
    import sys

    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None or not c10d.is_initialized():
        return
    from kernlock._internal.runtime import rank_guard as distributed

    pg = c10d._get_default_group()
    distributed.check_layer_ranks(c10d._world.pg_map[pg][1], pg.rank(), pg.size(), layers)
