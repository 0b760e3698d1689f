#!/usr/bin/env bash
# One command on a GPU machine: build Sieve's CUDA backend, run the GPU tests, and benchmark
# training steps against PyTorch on the same GPU. Works offline (no dependency installation:
# the machine needs Sieve's build dependencies, the CUDA toolkit with cuDNN/NCCL, and, for
# the peer figures, a python3 with PyTorch).
#
#   scripts/gpu_check.sh [--skip-build] [--no-tests] [--no-bench] [--models r18,r50]
#
# Steps (logs under build-gpu/gpu_check/):
#   1. nvidia-smi -L;
#   2. configure Release with CUDA (sm_90) into build-gpu and build, on all cores, what the
#      steps below run: the GPU test binaries (tests/gpu/test_cuda_*.cpp) and bench_nn_resnet;
#   3. ctest -L gpu (op suite, whole-model comparisons, determinism, SGD kernels, NCCL, the
#      device parameter home against the staged one (and on 2 ranks where 2 GPUs are seen),
#      host-side CUDA checks); a skipped test counts as a failure here;
#   4. the op-by-op suite per dtype (test_cuda_ops: cuda fp32 and bf16 against the ref
#      backend), the model comparisons with their measured differences (test_cuda_backend),
#      bitwise-reproducible training steps with SIEVE_CUDNN_DETERMINISTIC=1
#      (test_cuda_determinism), and the no-device error path (test_cuda_host with
#      CUDA_VISIBLE_DEVICES empty);
#   5. training-step throughput, median images/s: r18 = CIFAR ResNet-18 batch 512, r50 =
#      ImageNet ResNet-50 224x224 batch 256; Sieve on backend cuda in fp32 and bf16
#      (bench_nn_resnet; cuDNN algorithms from heuristics, and timed with
#      SIEVE_CUDNN_BENCHMARK=1), PyTorch fp32 eager and bf16 eager / torch.compile
#      (scripts/bench_resnet_torch_cuda.py);
#   6. training step time in the parameter homes, device-resident vs host-staged: pretrain of
#      CIFAR ResNet-18 batch 512 on synthetic data, 3 epochs each, with their final losses
#      (scripts/bench_param_home.sh; with r18);
#   7. a summary table (the last lines). Exit status 1 if the build or any test failed; a
#      failed benchmark shows as FAIL in the table.
# A GPU node without Sieve's build dependencies (no OpenMPI/HDF5/oneDNN development packages):
# build here and carry the binaries with scripts/gpu_bundle.sh, whose `run gpu_check` runs the
# same tests and the ResNet benchmark (how the 2026-11-24 H100 figures in docs/engine.md were
# taken).
# Where one command may run only ~10 minutes, run it in phases:
#   scripts/gpu_check.sh --no-bench                          # build + tests
#   scripts/gpu_check.sh --skip-build --no-tests --models r18
#   scripts/gpu_check.sh --skip-build --no-tests --models r50
# Environment: SIEVE_JOBS (default nproc), SIEVE_GPU_STEPS (timed steps, default 30),
# SIEVE_BENCH_VENV (a venv with PyTorch, default .venv-bench; else python3 on PATH).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 1
skip_build=0 tests=1 bench=1 models="r18,r50"
usage="--skip-build, --no-tests, --no-bench, --models r18,r50"
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-build) skip_build=1 ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --models)
      models="${2:-}"
      shift
      ;;
    *) echo "gpu_check: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
  shift
done
# Benchmark configurations: tag, batch, arch, stem, input size.
configs=()
for m in ${models//,/ }; do
  case "$m" in
    r18) configs+=("r18 512 resnet18 cifar 32") ;;
    r50) configs+=("r50 256 resnet50 imagenet 224") ;;
    *) echo "gpu_check: unknown model '$m' (r18, r50)" >&2; exit 2 ;;
  esac
done
export SIEVE_BUILD_DIR="$root/build-gpu"
. scripts/env.sh
build="$SIEVE_BUILD_DIR"
logs="$build/gpu_check"
jobs="${SIEVE_JOBS:-$(nproc)}"
steps="${SIEVE_GPU_STEPS:-30}"
failed=0
declare -A result  # summary rows: key -> text

say() { printf '\n===== %s =====\n' "$*"; }

echo "gpu_check: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
say "GPUs"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
else
  echo "nvidia-smi not found"
  gpu="unknown GPU"
fi

if [ "$skip_build" = 0 ]; then
  say "configure + build ($build, -j$jobs)"
  targets=(bench_nn_resnet shard_dataset pretrain)
  for src in tests/gpu/test_cuda_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
  if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSIEVE_ENABLE_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build "$build" -j"$jobs" --target "${targets[@]}"; then
    result[build]=ok
  else
    echo "gpu_check: the build failed; nothing else can run" >&2
    exit 1
  fi
else
  result[build]="skipped (--skip-build)"
fi
mkdir -p "$logs"

run_test() {  # key, log name, command...
  local key="$1" log="$logs/$2.log"
  shift 2
  local rc=0
  "$@" >"$log" 2>&1 || rc=$?
  case $rc in
    0) result[$key]="pass ($(grep -Eo '\[  PASSED  \] [0-9]+ tests?' "$log" | grep -Eo '[0-9]+') tests)" ;;
    77) result[$key]="NOT RUN: no usable GPU (see $log)" ;;
    *) result[$key]="FAIL (rc $rc, see $log)" ;;
  esac
  [ "$rc" = 0 ] || failed=1
}

for key in ctest ops_fp32 ops_bf16 models determinism no_device home_2ranks reducer_2ranks; do result[$key]="not run (--no-tests)"; done
if [ "$tests" = 1 ]; then
  say "ctest -L gpu"
  if ctest --test-dir "$build" -L gpu --output-on-failure --timeout 1200 2>&1 | tee "$logs/ctest_gpu.log"; then
    result[ctest]="pass ($(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$logs/ctest_gpu.log" | tail -1))"
  else
    result[ctest]="FAIL (see $logs/ctest_gpu.log)"
    failed=1
  fi
  # ctest counts a skip (exit 77) as not failed: a GPU machine must not skip.
  if grep -q "Skipped\|\*\*\*Skipped" "$logs/ctest_gpu.log"; then
    result[ctest]="${result[ctest]}; SKIPPED tests: the GPU was not usable"
    failed=1
  fi

  say "op-by-op suite (test_cuda_ops), whole models (test_cuda_backend), determinism, no-device path"
  run_test ops_fp32 ops_fp32 "$build/tests/test_cuda_ops" --gtest_filter='*/cuda_fp32'
  run_test ops_bf16 ops_bf16 "$build/tests/test_cuda_ops" --gtest_filter='*/cuda_bf16'
  run_test models models "$build/tests/test_cuda_backend"
  run_test determinism determinism "$build/tests/test_cuda_determinism"
  run_test no_device no_device env CUDA_VISIBLE_DEVICES= "$build/tests/test_cuda_host"
  # The device parameter home with NCCL reducing between ranks needs a GPU per rank.
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    run_test home_2ranks param_home_2ranks mpiexec -n 2 "$build/tests/test_cuda_param_home"
    run_test reducer_2ranks reducer_2ranks mpiexec -n 2 "$build/tests/test_cuda_sgd" --gtest_filter='CudaGradReducer.*'
  else
    result[home_2ranks]="not run: needs 2 GPUs"
    result[reducer_2ranks]="not run: needs 2 GPUs"
  fi
  grep -hE "^\[  FAILED  \]|Failure|rel diff|cosine" "$logs"/ops_*.log "$logs/models.log" || true
fi

# Median images/s of one benchmark run, or FAIL.
images_per_s() {  # log name, command...
  local log="$logs/$1.log"
  shift
  if timeout 480 "$@" >"$log" 2>&1; then
    grep -Eo 'RESULT [a-z_]+ [0-9.]+' "$log" | awk '{print $3}' | tail -1
  else
    echo FAIL
  fi
}

# PyTorch with CUDA: the bench venv's (install_deps --bench), else the system's.
torch_python=""
for py in "${SIEVE_BENCH_VENV:-$root/.venv-bench}/bin/python" python3 /usr/bin/python3; do
  if "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    torch_python="$py"
    break
  fi
done

declare -A ips
if [ "$bench" = 1 ]; then
  bin="$build/bench/bench_nn_resnet"
  torch_bench="$root/scripts/bench_resnet_torch_cuda.py"
  for cfg in "${configs[@]}"; do
    read -r tag batch arch stem size <<<"$cfg"
    # cuDNN algorithms from heuristics (the default) and timed (SIEVE_CUDNN_BENCHMARK=1, as
    # PyTorch's cudnn.benchmark below).
    for prec in fp32 bf16; do
      for find in 0 1; do
        say "sieve $arch $stem ${size}x$size batch $batch cuda $prec SIEVE_CUDNN_BENCHMARK=$find"
        ips[$tag.sieve.$prec.$find]=$(images_per_s "sieve_${tag}_${prec}_$find" env SIEVE_CUDNN_BENCHMARK=$find "$bin" "$batch" "$steps" 5 "$arch" 1.0 0 cuda "$prec" "$stem" "$size")
        cat "$logs/sieve_${tag}_${prec}_$find.log"
      done
    done
    for run in "fp32 eager" "bf16 eager" "bf16 compile"; do
      read -r prec mode <<<"$run"
      key="$tag.torch.$prec.$mode"
      if [ -z "$torch_python" ]; then
        ips[$key]="n/a (no PyTorch with CUDA)"
        continue
      fi
      say "torch $arch $stem ${size}x$size batch $batch $prec $mode"
      ips[$key]=$(images_per_s "torch_${tag}_${prec}_$mode" "$torch_python" "$torch_bench" "$batch" "$steps" 5 "$prec" "$mode" "$arch" "$stem" "$size")
      cat "$logs/torch_${tag}_${prec}_$mode.log"
    done
  done
fi

# The parameter homes (docs/training.md): what the device-resident home gains over staging.
home_row="not run (--no-bench or no r18)"
if [ "$bench" = 1 ] && [[ ",$models," == *,r18,* ]]; then
  say "parameter homes: staged vs device, pretrain ResNet-18 batch 512"
  if timeout 900 scripts/bench_param_home.sh --build "$build" --backend cuda --homes staged,device \
      >"$logs/param_home.log" 2>&1; then
    home_row="$(tail -n 2 "$logs/param_home.log" | awk '{ printf "%s %s img/s (loss %s); ", $1, $2, $3 }')device/staged $(tail -n 1 "$logs/param_home.log" | awk '{ print $4 }')"
  else
    home_row="FAIL (see $logs/param_home.log)"
    failed=1
  fi
  cat "$logs/param_home.log"
fi

ratio() {  # a / b, or "-" when either is not a number
  awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}

say "summary: $gpu"
printf '%-44s %s\n' "build (Release, CUDA sm_90)" "${result[build]}"
printf '%-44s %s\n' "ctest -L gpu" "${result[ctest]}"
printf '%-44s %s\n' "op suite cuda fp32 vs ref (tol 1e-4)" "${result[ops_fp32]}"
printf '%-44s %s\n' "op suite cuda bf16 vs ref (tol 2e-2)" "${result[ops_bf16]}"
printf '%-44s %s\n' "ResNet-18/50 cuda vs cpu, kernel edges" "${result[models]}"
printf '%-44s %s\n' "bitwise-reproducible steps (deterministic)" "${result[determinism]}"
printf '%-44s %s\n' "no-device UsageError (CUDA_VISIBLE_DEVICES=)" "${result[no_device]}"
printf '%-44s %s\n' "NCCL bucket reducer, 2 ranks" "${result[reducer_2ranks]}"
printf '%-44s %s\n' "param home device vs staged, 2 ranks (NCCL)" "${result[home_2ranks]}"
printf '%-44s %s\n' "param home device vs staged (r18 b512)" "$home_row"
if [ "$bench" = 1 ]; then
  for cfg in "${configs[@]}"; do
    read -r tag batch arch stem size <<<"$cfg"
    printf '\n%s %s %sx%s, batch %s: training step, median images/s\n' "$arch" "$stem" "$size" "$size" "$batch"
    printf '  %-34s %12s\n' "sieve cuda fp32 (cuDNN heuristics)" "${ips[$tag.sieve.fp32.0]}"
    printf '  %-34s %12s\n' "sieve cuda fp32 (cuDNN timed)" "${ips[$tag.sieve.fp32.1]}"
    printf '  %-34s %12s\n' "sieve cuda bf16 (cuDNN heuristics)" "${ips[$tag.sieve.bf16.0]}"
    printf '  %-34s %12s\n' "sieve cuda bf16 (cuDNN timed)" "${ips[$tag.sieve.bf16.1]}"
    printf '  %-34s %12s\n' "torch fp32 eager" "${ips[$tag.torch.fp32.eager]}"
    printf '  %-34s %12s\n' "torch bf16 eager" "${ips[$tag.torch.bf16.eager]}"
    printf '  %-34s %12s\n' "torch bf16 compile" "${ips[$tag.torch.bf16.compile]}"
    printf '  ratios (timed cuDNN): sieve fp32 / torch fp32 eager %s; sieve bf16 / torch bf16 eager %s, / compile %s\n' \
      "$(ratio "${ips[$tag.sieve.fp32.1]}" "${ips[$tag.torch.fp32.eager]}")" \
      "$(ratio "${ips[$tag.sieve.bf16.1]}" "${ips[$tag.torch.bf16.eager]}")" \
      "$(ratio "${ips[$tag.sieve.bf16.1]}" "${ips[$tag.torch.bf16.compile]}")"
  done
fi
exit "$failed"
