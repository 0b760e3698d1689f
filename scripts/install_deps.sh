#!/usr/bin/env bash
# Installs every Debian package Sieve needs to build, test, benchmark and run.
# Idempotent: packages already present are skipped by apt; safe to re-run.
#   scripts/install_deps.sh          # build, test and run
#   scripts/install_deps.sh --bench  # also the benchmark peers (PyPI, in .venv-bench: PyTorch,
#                                    # torchvision, openTSNE, scikit-learn, dbscan, cleanlab, Pillow; ~5 GB)
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ninja-build
  # MPI + parallel HDF5 (the openmpi flavour of libhdf5)
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  # CLI, config, JSON
  libboost-program-options-dev libyaml-cpp-dev nlohmann-json3-dev
  # math
  libopenblas-dev liblapacke-dev libdnnl-dev libfftw3-dev zlib1g-dev
  # approximate nearest neighbours: the k-NN of large t-SNE inputs (hnswlib header-only;
  # faiss's inverted-file index, a static library)
  libhnswlib-dev libfaiss-dev
  # image-folder ingest: JPEG (libjpeg-turbo) and PNG decoding
  libjpeg62-turbo-dev libpng-dev
  # Debian's oneDNN is built with its OpenCL runtime: its CMake config wants the headers
  ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers
  # tests
  googletest libgtest-dev
  # workflow: Slurm (+ PMIx plugin) and munge for the single-node test cluster
  slurm-wlm slurmctld slurmd slurm-client munge libpmix-bin
  # report: plotting, headless browser check
  gnuplot-nox chromium
  # peers for benchmarks and file checks; venv + setuptools + wheel: the python/ package's test
  # installs it into a fresh venv over these (tests/pipeline/python_package.sh)
  python3-h5py python3-numpy python3-sklearn python3-yaml python3-venv python3-setuptools
  python3-wheel
  # Lmod: the module file that `cmake --install` writes (tests/slurm/installed_module.sh)
  lmod
  # real image data (30 MB): Fashion-MNIST's IDX files under /usr/share/datasets/fashion-mnist,
  # read by configs/fashion_mnist.yaml
  dataset-fashion-mnist
)

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "install_deps: done"
fi

# Benchmark peers from PyPI, in a virtual environment beside the tree (never on the test
# path): SIEVE_BENCH_VENV, default .venv-bench/.
if [ "${1:-}" = "--bench" ]; then
  venv="${SIEVE_BENCH_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-bench}"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # The current PyTorch release as users install it (pip install torch torchvision): the
  # training peer of bench_train.sh / bench_dataparallel.sh, in its best CPU and GPU modes.
  # cleanlab: the label-issue peer of bench_detection.sh, on the same probabilities.
  "$venv/bin/pip" install -q --upgrade pillow numpy h5py scikit-learn openTSNE dbscan torch torchvision cleanlab
  echo "install_deps: bench environment $venv: $("$venv/bin/python" -c 'import PIL, sklearn, openTSNE, torch, cleanlab; print("Pillow", PIL.__version__, "scikit-learn", sklearn.__version__, "openTSNE", openTSNE.__version__, "torch", torch.__version__, "cleanlab", cleanlab.__version__)')"
fi
