#!/usr/bin/env bash
# Issue 6's GPU measurements in one call (a lent GPU's time is short): the CUDA-graph test,
# the equivalence script and the training benchmark at full width on every path. Each
# step's output goes to $OUT (the device tool's folder) or results/bench; a failing step
# is noted and the others still run.
#   bash bench/gpu_check.sh          # PYTHON=... chooses the interpreter (default python3)
# Then, where the workflow's packages are (jsonschema and the config):
#   python -m initmem cost --bench training.csv [--bench-path graph_cl]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/bench}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
status=0

step() {  # step NAME COMMAND...: run, keep its output in $out/NAME.txt
    local name=$1
    shift
    "$@" 2>&1 | tee "$out/$name.txt" || { echo "FAILED: $name" | tee -a "$out/failed.txt"; status=1; }
}

step gpu nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
step test_step "$py" -m pytest -q -p no:cacheprovider tests/test_step.py
step equivalence "$py" bench/equivalence.py --device cuda
step training "$py" bench/bench_training.py --device cuda --packs 1 5 25 \
    --cases resnet9:16 resnet9:128 resnet56:128 resnet9_ln:128 --out "$out/training.csv"
# ResNet-110's N = 25 pack at b = 128, all paths side by side, may not fit (an estimate,
# unmeasured): measured on its own, with two paths
step training_r110 "$py" bench/bench_training.py --device cuda --packs 1 5 25 \
    --cases resnet110:128 --paths eager graph_cl --out "$out/training_r110.csv"
exit $status
