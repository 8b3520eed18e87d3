#!/usr/bin/env bash
# For a machine with an NVIDIA GPU and driver: builds with CUDA, runs the policy's model tests
# on the GPU, prints the policy benchmark on the GPU next to the CPU one, then runs the main job
# (train sql-agent-v0 with GRPO from SmolLM2-135M) with --device cuda: its log, metrics.jsonl
# (tokens/s per iteration), config.json and closing_eval.json are copied under OUT_DIR. The
# device has no network: carry the model cache (SANDGYM_CACHE, see below). SQL_RUN_TIMEOUT
# bounds the training run (480 s by default) so the results come back within a device call.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (results are also written as JSON under OUT_DIR)
# The first use of each kernel on a fresh machine compiles it (measured on an H200: `bench
# policy` with the tiny model took 6 min 39 s, nearly all of it compiling): give it time.
# GPU_STEPS picks the steps ("bench train" by default); SQL_MODEL the training run's model
# (the pretrained SmolLM2 by default; `tiny` where the model cache cannot be carried).
# CubeCL's autotuning runs at CUBECL_AUTOTUNE_LEVEL (minimal by default: one candidate per
# kernel instead of timing each) and its compilation and autotune logs go to OUT_DIR
# (cubecl-*.log, each line a kernel compiled or tuned), so the time before the first
# iteration can be read kernel by kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-target/gpu-check}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-12080}"
export CUBECL_AUTOTUNE_LEVEL="${CUBECL_AUTOTUNE_LEVEL:-minimal}"
bin="${SANDGYM_BIN:-${CARGO_TARGET_DIR:-target}/release/sandgym}"
steps="${GPU_STEPS:-bench train}"
cat > cubecl.toml <<EOF
[compilation.logger]
level = "basic"
file = "$out/cubecl-compilation.log"
[autotune.logger]
level = "minimal"
file = "$out/cubecl-autotune.log"
EOF
trap 'rm -f cubecl.toml' EXIT
# Each line of a long step with the seconds since the script started.
stamp() { while IFS= read -r line; do printf '%5d %s\n' "$SECONDS" "$line"; done; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"

# A device without a Rust toolchain takes a binary built elsewhere with
# `cargo build --release --features cuda --bin sandgym` (SANDGYM_BIN=PATH); the build and the
# CUDA tests below are then left out. NVRTC must be findable (e.g. LD_LIBRARY_PATH with the
# CUDA toolkit's lib64).
if [ -z "${SANDGYM_BIN:-}" ]; then
  echo "==> build with --features cuda"
  cargo build --release --features cuda --bin sandgym

  echo "==> policy tests on the GPU"
  cargo test --release -p sandgym-policy --features cuda --test all 2>&1 | tee "$out/policy-tests.txt"
fi

if [[ " $steps " == *" bench "* ]]; then
echo "==> bench policy: cuda, then cpu"
"$bin" bench policy --device cuda --seconds 1 --json | tee "$out/bench-policy-cuda.json"
"$bin" bench policy --device cpu --seconds 1 --json | tee "$out/bench-policy-cpu.json"
echo "==> bench policy: the pretrained 135M model on cuda (the device has no network: carry the"
echo "    model cache, e.g. SANDGYM_CACHE=shared/cache after \`sandgym model fetch\` here)"
"$bin" bench policy --model smollm2-135m-instruct --device cuda --seconds 1 --json \
  | tee "$out/bench-policy-smollm2-cuda.json" || echo "bench policy --model failed (see above)"
fi
[[ " $steps " == *" train "* ]] || exit 0

echo "==> the main job on the GPU: train sql-agent-v0 with GRPO, --device cuda (f32: the"
echo "    decoder has no half-precision path yet); metrics and the closing table go to $out"
run="target/gpu-check-run"
rm -rf "$run"
start=$SECONDS
status=0
timeout "${SQL_RUN_TIMEOUT:-480}" "$bin" train --env sql-agent-v0 --algo grpo \
  --model "${SQL_MODEL:-smollm2-135m-instruct}" --device cuda --out "$run" 2>&1 \
  | stamp | tee "$out/train-sql-cuda.txt" || status=$?
[ -f "$out/cubecl-compilation.log" ] && echo "kernels compiled: $(wc -l < "$out/cubecl-compilation.log")"
echo "train exit status $status after $(( SECONDS - start )) s" | tee -a "$out/train-sql-cuda.txt"
for f in metrics.jsonl closing_eval.json config.json; do
  [ -f "$run/$f" ] && cp "$run/$f" "$out/sql-cuda-$f"
done
if [ -f "$run/metrics.jsonl" ]; then
  echo "generated tokens/s per iteration:"
  grep -o '"tokens_per_s":[0-9.e+-]*' "$run/metrics.jsonl" || true
fi
exit "$status"
