#!/usr/bin/env bash
# The GPU checks, headless, in about 7 minutes (labkit gpu-check; see README "On a GPU box").
#   bash scripts/gpu_check.sh [OUT_DIR]          on a GPU box with the kit installed
#   source .device/setup.sh && bash scripts/gpu_check.sh   on the lent GPU box (no package index)
# Extra arguments go to `labkit gpu-check` (e.g. --budget 300 --only 07).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-runs/gpu-check}"
shift || true
if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$py" -m labkit gpu-check --out "$out" "$@"
