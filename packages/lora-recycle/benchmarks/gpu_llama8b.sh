#!/usr/bin/env bash
# The adaptive layer (torch and triton backends) vs peft at Llama-3.1-8B module shapes; writes one JSON per run.
set -euo pipefail
here=$(dirname "$0")
out=${1:-gpu-bench}
mkdir -p "$out"
for shape in 4096x4096 1024x4096 14336x4096 4096x14336; do
  for backend in torch triton; do
    python "$here/bench_adaptive_layer.py" --device cuda --dtype bfloat16 --backend "$backend" --shape "$shape" \
      --tokens 2048 --repeats 25 --json "$out/$shape-$backend.json"
  done
done
