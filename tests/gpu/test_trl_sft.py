"""`kernlock run -- trl sft` on a GPU (no `--use_cpu`): the user's training command, in its own
process tree, binds every kernel Transformers loads to the lock and asks the Hub for none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import kernlock
from helpers import FA2, LockedProject
from kernlock.testing.hub import TestHub
from scripts.harness import CLIENT_CHATTER, run_within

pytestmark = pytest.mark.gpu

LIGER = "kernels-community/liger-kernels"
ROTARY = "kernels-community/rotary"


def test_kernlock_run_trl_sft_trains_on_the_gpu_from_the_lock(
        hub: TestHub, declared_model: LockedProject,
        record_property: Callable[[str, object], None]) -> None:
    hub.reset_counts()
    done = run_within(300, [
        sys.executable, "-m", "kernlock", "run", "--",
        "trl", "sft", "--model_name_or_path", "model", "--dataset_name", "data",
        "--attn_implementation", FA2, "--max_steps", "3", "--per_device_train_batch_size", "4",
        "--output_dir", "out", "--report_to", "none", "--save_strategy", "no",
        "--logging_steps", "1",
    ], declared_model.path, HF_DATASETS_OFFLINE="1", KERNLOCK_VERBOSE="1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    # TRL posts its own usage telemetry (CLIENT_CHATTER): not a kernel load.
    assert [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)] == []
    target = kernlock.current_target()
    by_repo = {k.repo: k for k in declared_model.lock.kernels}
    for repo in (FA2, LIGER, ROTARY):
        entry = by_repo[repo]
        bound = (f"kernlock: {repo} (version {entry.version}) -> {entry.commit} "
                 f"[{entry.variant_for(target).name}]")
        assert bound in done.stderr, (bound, done.stderr[-4000:])
    logged = [line for line in (done.stdout + done.stderr).splitlines() if "'loss'" in line]
    assert len(logged) == 3, logged
    record_property("logged_steps", logged)
