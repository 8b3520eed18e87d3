#!/usr/bin/env bash
# For a machine with an NVIDIA GPU and driver: builds with CUDA, runs the policy's model tests
# on the GPU, and prints the policy benchmark on the GPU next to the CPU one.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (results are also written as JSON under OUT_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-target/gpu-check}}"
mkdir -p "$out"
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-12080}"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"

echo "==> build with --features cuda"
cargo build --release --features cuda --bin sandgym

echo "==> policy tests on the GPU"
cargo test --release -p sandgym-policy --features cuda --test all 2>&1 | tee "$out/policy-tests.txt"

echo "==> bench policy: cuda, then cpu"
./target/release/sandgym bench policy --device cuda --seconds 1 --json | tee "$out/bench-policy-cuda.json"
./target/release/sandgym bench policy --device cpu --seconds 1 --json | tee "$out/bench-policy-cpu.json"
echo "==> bench policy: the pretrained 135M model on cuda (the device has no network: carry the"
echo "    model cache, e.g. SANDGYM_CACHE=shared/cache after \`sandgym model fetch\` here)"
./target/release/sandgym bench policy --model smollm2-135m-instruct --device cuda --seconds 1 --json \
  | tee "$out/bench-policy-smollm2-cuda.json" || echo "bench policy --model failed (see above)"
