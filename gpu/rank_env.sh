#!/usr/bin/env bash
# torchrun --no-python gpu/rank_env.sh CMD...: give local rank 1 its own lock or target, so that
# gpu/ddp.py can show the cross-rank identity guard refusing a job whose ranks disagree.
#   KL_RANK1_LOCKFILE=PATH   rank 1 reads another kernels.lock
#   KL_RANK1_TARGET=TARGET   rank 1 acts as on another target (kernlock's simulated targets)
if [ "${LOCAL_RANK:-0}" = "1" ]; then
  if [ -n "${KL_RANK1_LOCKFILE:-}" ]; then export KERNLOCK_LOCKFILE="$KL_RANK1_LOCKFILE"; fi
  if [ -n "${KL_RANK1_TARGET:-}" ]; then export KERNLOCK_TARGET="$KL_RANK1_TARGET"; fi
fi
exec "$@"
