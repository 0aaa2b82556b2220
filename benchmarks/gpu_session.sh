#!/usr/bin/env bash
# The prepared GPU check, one command on one lent GPU (python -m yocou.evaluation.bench.gpu_session; its step limits
# add up to 560 s, each step in its own process; not yet run on a GPU, so these are limits, not measured times).
# Writes results/gpu/<device>/ (session.json, one <step>.json per step, written as soon as measured) and exits
# non-zero when a step failed or ran past its limit. `--cpu-smoke --out DIR` runs the same steps at tiny shapes on CPU.
# Usage: bash benchmarks/gpu_session.sh [--cpu-smoke --out DIR]   (from the repository root)
set -u -o pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
python3 -m yocou.evaluation.bench.gpu_session "$@"
