#!/usr/bin/env bash
# A 2-rank DDP job on one machine under `kernlock run` (the job the test suite runs on CPU).
# Run it in the project directory, where kernels.lock is:
#   examples/cluster/two_ranks.sh torchrun|accelerate [train.py options]
#   examples/cluster/two_ranks.sh torchrun                                  # CPU, gloo
#   examples/cluster/two_ranks.sh torchrun --backend nccl --device cuda     # 2 GPUs, NCCL
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
launcher=${1:?usage: two_ranks.sh torchrun|accelerate [train.py options]}
shift
case $launcher in
  torchrun)
    exec kernlock run -v -- torchrun --standalone --nproc-per-node 2 "$here/train.py" "$@" ;;
  accelerate)
    port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # --multi_gpu selects accelerate's torchrun launcher; train.py picks the backend and device itself (gloo/CPU too).
    exec kernlock run -v -- accelerate launch --multi_gpu --num_processes 2 --num_machines 1 \
      --mixed_precision no --dynamo_backend no --main_process_port "$port" "$here/train.py" "$@" ;;
  *)
    echo "two_ranks.sh: unknown launcher $launcher (use torchrun or accelerate)" >&2; exit 2 ;;
esac
