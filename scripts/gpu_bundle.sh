#!/usr/bin/env bash
# Pack prebuilt GPU binaries for a GPU node that lacks Sieve's build dependencies (compute
# nodes often carry the NVIDIA driver and CUDA libraries but no OpenMPI, HDF5, oneDNN or
# OpenBLAS development packages): the GPU test binaries and bench_nn_resnet from a CUDA build,
# every shared library they load except glibc and the CUDA libraries themselves, the OpenMPI
# and PMIx run-time plugin trees (relocated with OPAL_PREFIX / PMIX_INSTALL_PREFIX), the
# PyTorch peer script, and a wrapper, bundle/run, that sets the paths up and runs one command.
#
#   scripts/gpu_bundle.sh OUT.tar.xz [BUILD_DIR=build]
#   # on the GPU node:
#   tar xf OUT.tar.xz -C /tmp && /tmp/sieve-gpu/run gpu_check   # tests + r18 benchmark
#   /tmp/sieve-gpu/run test_cuda_ops --gtest_filter='*/cuda_bf16'   # or any one binary
#
# The CUDA libraries (cudart, cuBLAS, cuDNN, NCCL: ~1 GB) are taken from the node: the
# wrapper looks in $CUDA_HOME/lib64, /usr/local/cuda/lib{64,} and any Python site-packages'
# nvidia/*/lib (PyTorch's CUDA wheels), and says which it found. The binaries need the same
# major versions as the build's (ldd below names them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: scripts/gpu_bundle.sh OUT.tar.xz [BUILD_DIR]}"
build="${2:-$root/build}"
binaries=("$build/bench/bench_nn_resnet")
for src in "$root"/tests/gpu/test_cuda_*.cpp; do binaries+=("$build/tests/$(basename "$src" .cpp)"); done
# The pipeline's tools too, where built, so that pipelines/run_local.sh can run on the node
# (PATH of `run` includes bin/).
for tool in shard_dataset pretrain extract_features reduce_dims cluster_filter train_scaled report; do
  [ -x "$build/tools/$tool" ] && binaries+=("$build/tools/$tool")
done
for b in "${binaries[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle: $b is missing: build it first (cmake with CUDA, target $(basename "$b"))" >&2; exit 1; }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
dest="$stage/sieve-gpu"
mkdir -p "$dest/bin" "$dest/lib" "$dest/root"
cp "${binaries[@]}" "$dest/bin/"
cp "$root/scripts/bench_resnet_torch_cuda.py" "$dest/bin/"

# Libraries the node provides: glibc's own, the driver, and the CUDA libraries.
provided='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libcuda|libnvidia-.*|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|linux-vdso)\.so'
ldd "${binaries[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  if [[ "$name" =~ $provided ]]; then continue; fi
  cp -L "$path" "$dest/lib/$name"
done

# OpenMPI and PMIx load their components at run time from their install trees.
# (Debian's layout; OPAL_PREFIX relocates the paths ompi_info --path all prints.)
for dir in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /usr/share/pmix; do
  if [ -d "$dir" ]; then
    mkdir -p "$dest/root$(dirname "$dir")"
    cp -a "$dir" "$dest/root$dir"
  fi
done

# A singleton MPI_Init starts orted; mpirun runs the NCCL test on several ranks.
mkdir -p "$dest/root/usr/bin"
for exe in orted orterun; do cp -L "/usr/bin/$exe" "$dest/root/usr/bin/"; done
ln -s orterun "$dest/root/usr/bin/mpirun"
ldd /usr/bin/orted | awk '/=> \// {print $1, $3}' | while read -r name path; do
  [[ "$name" =~ $provided ]] || [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
done

cat >"$dest/run" <<'WRAPPER'
#!/usr/bin/env bash
# Run one command of this bundle: a binary from bin/, or `gpu_check` (tests, then the ResNet-18
# training-step benchmark against PyTorch). Logs of gpu_check go to $SIEVE_GPU_LOGS (default
# ./gpu_check_logs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cuda_dirs=""
for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/lib \
    $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | tr ' ' '\n' | sed 's|$|/nvidia|'); do
  [ -d "$d" ] || continue
  for lib in $(find "$d" -maxdepth 4 \( -name 'libcudnn.so.*' -o -name 'libnccl.so.*' -o -name 'libcublas.so.*' -o -name 'libcudart.so.*' -o -name 'libcublasLt.so.*' \) 2>/dev/null); do
    case ":$cuda_dirs:" in *":$(dirname "$lib"):"*) ;; *) cuda_dirs="$cuda_dirs:$(dirname "$lib")" ;; esac
  done
done
export LD_LIBRARY_PATH="$here/lib:$here/root/usr/lib/x86_64-linux-gnu/pmix2/lib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$here/root/usr" PMIX_INSTALL_PREFIX="$here/root/usr/lib/x86_64-linux-gnu/pmix2"
export PATH="$here/bin:$here/root/usr/bin:$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ $# -gt 0 ] || { echo "usage: $0 gpu_check | BINARY [ARGS...]  (binaries: $(ls "$here/bin" | tr '\n' ' '))" >&2; exit 2; }
if [ "$1" != gpu_check ]; then
  bin="$1"
  shift
  [ -x "$here/bin/$bin" ] && exec "$here/bin/$bin" "$@"
  exec "$bin" "$@"  # e.g. mpirun -n 2 "$here/bin/test_cuda_backend"
fi
logs="${SIEVE_GPU_LOGS:-$PWD/gpu_check_logs}"
mkdir -p "$logs"
echo "CUDA libraries from:${cuda_dirs//:/ }"
nvidia-smi -L || true
declare -a rows
check() {  # name, command...
  local name="$1" rc=0
  shift
  "$@" >"$logs/$name.log" 2>&1 || rc=$?
  local passed
  passed="$(grep -Eo '\[  PASSED  \] [0-9]+' "$logs/$name.log" | grep -Eo '[0-9]+$' || true)"
  rows+=("$(printf '%-28s rc %-3s passed %-4s %s' "$name" "$rc" "${passed:-0}" "$(grep -E '^\[  FAILED  \]' "$logs/$name.log" | head -3 | tr '\n' ' ')")")
}
check ops_fp32 "$here/bin/test_cuda_ops" --gtest_filter='*/cuda_fp32'
check ops_bf16 "$here/bin/test_cuda_ops" --gtest_filter='*/cuda_bf16'
check backend "$here/bin/test_cuda_backend"
check determinism env SIEVE_CUDNN_DETERMINISTIC=1 "$here/bin/test_cuda_determinism"
check sgd "$here/bin/test_cuda_sgd"
check host "$here/bin/test_cuda_host"
check no_device env CUDA_VISIBLE_DEVICES= "$here/bin/test_cuda_host"
printf '%s\n' "${rows[@]}"
steps="${SIEVE_GPU_STEPS:-30}"
for cfg in ${SIEVE_GPU_MODELS:-"512:resnet18:cifar:32"}; do
  IFS=: read -r batch arch stem size <<<"$cfg"
  for prec in fp32 bf16; do
    for find in 0 1; do
      log="$logs/sieve_${arch}_${prec}_$find.log"
      SIEVE_CUDNN_BENCHMARK=$find timeout 300 "$here/bin/bench_nn_resnet" "$batch" "$steps" 5 "$arch" 1.0 0 cuda "$prec" "$stem" "$size" >"$log" 2>&1
      echo "sieve $arch $prec cudnn_benchmark=$find: $(grep -Eo 'RESULT [a-z_]+ [0-9.]+' "$log" | tail -1 || tail -2 "$log")"
    done
  done
  for run in "fp32 eager" "bf16 eager" "bf16 compile"; do
    read -r prec mode <<<"$run"
    log="$logs/torch_${arch}_${prec}_$mode.log"
    timeout 300 python3 "$here/bin/bench_resnet_torch_cuda.py" "$batch" "$steps" 5 "$prec" "$mode" "$arch" "$stem" "$size" >"$log" 2>&1
    echo "torch $arch $prec $mode: $(grep -Eo 'RESULT [a-z_]+ [0-9.]+' "$log" | tail -1 || tail -2 "$log")"
  done
done
WRAPPER
chmod +x "$dest/run"
tar -C "$stage" -cJf "$out" sieve-gpu
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1)); needs on the node: $(ldd "${binaries[@]}" | awk '/=> / {print $1}' | grep -E 'libcudart|libcublas|libcudnn|libnccl' | sort -u | tr '\n' ' ')"
