"""The run record in a Trainer's outputs: `kernlock.json` in every checkpoint and in the output
directory.

While a lock is applied (`kernlock.apply()`, `kernlock run`), every `transformers.Trainer`
(TRL's trainers included) gets `RecordCallback`: on each save it writes what the process
loaded under the lock (`kernlock.loaded()`) into the checkpoint directory, and at the end
into `output_dir`, so a checkpoint says which kernel builds produced it. No Hub request,
no work in the training step: the record is built from what kernlock already knows.
`kernlock verify --against CHECKPOINT` compares it with what the current lock would load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kernlock._internal.lockfile.run_record import RECORD_FILENAME


def write_record(directory: str | os.PathLike[str], record: dict[str, Any] | None) -> bool:
    """Write `record` as `kernlock.json` into `directory` (when both exist); whether it was
    written."""
    from pathlib import Path

    from kernlock._internal.fs.inside import write_inside

    if record is None or not os.path.isdir(directory):
        return False
    # never through a link planted as `kernlock.json` in a shared output directory
    write_inside(Path(directory), RECORD_FILENAME, json.dumps(record, indent=2) + "\n")
    return True


def _record_or_warn(directory: str, record: dict[str, Any] | None) -> None:
    """Write the record; one that cannot be written (a link planted as `kernlock.json`, a full
    disk) is a warning naming why, never the end of a training run at its checkpoint."""
    from kernlock._internal.runtime.notices import warn_once
    from kernlock.errors import WriteError

    try:
        write_record(directory, record)
    except (WriteError, OSError) as error:
        warn_once(f"record:{directory}", f"kernlock: run record not written: {error}")


def _callback_class(trainer_callback: type, loaded: Callable[[], dict[str, Any] | None]) -> type:
    class RecordCallback(trainer_callback):
        """Writes kernlock's run record into each checkpoint and into the output directory."""

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                _record_or_warn(
                    os.path.join(args.output_dir, f"checkpoint-{state.global_step}"), loaded()
                )

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                _record_or_warn(args.output_dir, loaded())

    return RecordCallback


def patch_trainer(module: ModuleType, loaded: Callable[[], dict[str, Any] | None]) -> None:
    """Make every `Trainer` of `transformers.trainer` add `RecordCallback` (once) when it is built;
    `loaded` gives the record (`kernlock.loaded()`)."""
    from kernlock._internal.compat.transformers import trainer_callback_class

    callback = _callback_class(trainer_callback_class(), loaded)
    trainer = module.Trainer
    original = trainer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not any(type(c).__name__ == callback.__name__ for c in self.callback_handler.callbacks):
            self.add_callback(callback)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    trainer.__init__ = __init__
