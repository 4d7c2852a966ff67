#!/usr/bin/env bash
# Lockstep seeds on a GPU: seed-steps per second of one chunk of 1, 8, 32 and 128 seeds, each alone on the device,
# with the real trainer and the default pilot's model. Run it from the project's environment on a machine with
# CUDA; it prints the figures and their JSON (about 5 minutes on one GPU). CI never runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch, sys; sys.exit(None if torch.cuda.is_available() else 'bench/gpu.sh: torch sees no CUDA device')"
exec python -m bench.lockstep --device cuda --chunks 1 8 32 128 --steps 200 "$@"
