#!/usr/bin/env bash
# Every noise detector on data with known label noise of each kind: precision, recall, F1,
# average precision, AUROC, flagged vs true count, the confident joint's estimate, and the
# time of each stage. Natural configs, no per-cell tuning (docs/detection.md has the table).
#
#   scripts/bench_detection.sh [--out DIR] [--cells "DATA:KIND:RATE ..."] [--set key=value ...]
#
# DATA: fmnist12k (the first 12,000 Fashion-MNIST training images and all 10,000 test images,
#       configs/fashion_mnist.yaml at width 1/8, 12 epochs), fmnist (all 60,000, same recipe),
#       quickstart (configs/quickstart.yaml's synthetic images, its own noise switched off).
# KIND: symmetric | pairwise | instance (data.label_noise.kind); RATE: 0.1, 0.2, 0.4 ...
# Default cells: fmnist12k at 20 % of each kind, and quickstart pairwise 20 %.
# Output: DIR (default bench-out/detection)/<cell>/ (the run directory and logs) and
# DIR/table.md. Needs the build (scripts/test.sh or cmake --build build) and the
# dataset-fashion-mnist package for the fmnist cells.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"
out="$root/bench-out/detection"
cells="fmnist12k:symmetric:0.2 fmnist12k:pairwise:0.2 fmnist12k:instance:0.2 quickstart:pairwise:0.2"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --cells) cells="$2"; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench_detection: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
tools="$SIEVE_BUILD_DIR/tools"
for t in shard_dataset pretrain extract_features reduce_dims cluster_filter; do
  [ -x "$tools/$t" ] || { echo "bench_detection: $tools/$t not built" >&2; exit 1; }
done

# The Fashion-MNIST subset: IDX files cut to the first N training images (headers rewritten).
fmnist=/usr/share/datasets/fashion-mnist
subset_idx() {  # subset_idx DIR N
  mkdir -p "$1"
  /usr/bin/python3 - "$fmnist" "$1" "$2" <<'EOF'
import gzip, os, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def read(name):
    for cand in (name, name + ".gz"):
        p = os.path.join(src, cand)
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    sys.exit(f"bench_detection: {src}/{name}(.gz) missing (apt-get install dataset-fashion-mnist)")
for stem, cut in (("train-images-idx3-ubyte", n), ("train-labels-idx1-ubyte", n),
                  ("t10k-images-idx3-ubyte", None), ("t10k-labels-idx1-ubyte", None)):
    b = read(stem)
    ndim = b[3]
    dims = list(struct.unpack(">" + "I" * ndim, b[4:4 + 4 * ndim]))
    per = 1
    for d in dims[1:]:
        per *= d
    if cut is not None:
        dims[0] = min(cut, dims[0])
    head = b[:4] + struct.pack(">" + "I" * ndim, *dims)
    body = b[4 + 4 * ndim: 4 + 4 * ndim + dims[0] * per]
    open(os.path.join(dst, stem), "wb").write(head + body)
EOF
}

printf '| data | noise | detector | flagged | true | estimated | precision | recall | F1 | AP | AUROC |\n' >"$out/table.md"
printf '|---|---|---|---|---|---|---|---|---|---|---|\n' >>"$out/table.md"
for cell in $cells; do
  IFS=: read -r data kind rate <<<"$cell"
  dir="$out/${data}_${kind}_${rate}"
  rm -rf "$dir"
  mkdir -p "$dir"
  case "$data" in
    fmnist12k|fmnist)
      src="$fmnist"
      if [ "$data" = fmnist12k ]; then src="$out/fmnist12k-idx"; subset_idx "$src" 12000; fi
      sets=(--config "$root/configs/fashion_mnist.yaml" --set data.path="$src"
            --set pretrain.model.width=0.125 --set pretrain.epochs=12) ;;
    quickstart)
      sets=(--config "$root/configs/quickstart.yaml" --set data.synthetic.label_noise=0
            --set data.synthetic.outliers=0) ;;
    *) echo "bench_detection: unknown data '$data'" >&2; exit 2 ;;
  esac
  sets+=(--set run.dir="$dir" --set data.label_noise.rate="$rate" --set data.label_noise.kind="$kind"
         ${extra[@]+"${extra[@]}"})
  times=()
  for stage in shard_dataset pretrain extract_features reduce_dims cluster_filter; do
    t0=$(date +%s.%N)
    if ! "$tools/$stage" "${sets[@]}" >"$dir/$stage.log" 2>&1; then
      echo "bench_detection: $cell: $stage failed; log: $dir/$stage.log" >&2
      tail -3 "$dir/$stage.log" >&2
      exit 1
    fi
    times+=("$stage $(printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)") s")
  done
  echo "bench_detection: $cell: ${times[*]}"
  /usr/bin/python3 - "$dir/filter.h5" "$data" "$kind $rate" >>"$out/table.md" <<'EOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
est = f["/noise_estimate"].attrs["total"] if "/noise_estimate" in f else ""
chosen = f.attrs["method"]
chosen = chosen.decode() if isinstance(chosen, bytes) else chosen
for name in f["/detectors"]:
    a = f["/detectors/" + name].attrs
    mark = " (chosen)" if name == chosen else ""
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {name}{mark} | {a['flagged']} | {a['truth']} | {est} | "
          f"{a['precision']:.3f} | {a['recall']:.3f} | {a['f1']:.3f} | {a['average_precision']:.3f} | "
          f"{a['auroc']:.3f} |")
EOF
done
cat "$out/table.md"
