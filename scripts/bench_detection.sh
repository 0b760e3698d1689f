#!/usr/bin/env bash
# Every noise detector on data with known label noise of each kind: precision, recall, F1,
# average precision, AUROC, flagged vs true count, the confident joint's estimate, the
# seconds of each detector (column s) and the time of each stage. "(in doubt)" after the
# estimate: cluster_filter's caution fired (the early model's own error is as large as it);
# "(capped at N)": the test split's count capped the decisions (filter.test_bound); "(follows
# the model)": its caution that the labels follow the model's confusions fired.
# Natural configs, no per-cell tuning (docs/detection.md has the table).
#
#   scripts/bench_detection.sh [--out DIR] [--cells "DATA:KIND:RATE ..."] [--ceiling] [--oracle]
#                              [--sweep SEEDS] [--set key=value ...]
#
# DATA: fmnist12k (the first 12,000 Fashion-MNIST training images and all 10,000 test images,
#       configs/fashion_mnist.yaml at width 1/8, 24 epochs), fmnist (all 60,000, same recipe),
#       fmnistlt (a long tail: class c keeps its first round(6000 x 10^(-c/9)) training images,
#       6,000 T-shirt/top down to 600 Ankle boot, 24,523 in all; all 10,000 test images; same
#       recipe: classes as unequal as real data's, which no session tuned for),
#       quickstart (configs/quickstart.yaml's synthetic images, its own noise switched off),
#       digits (scikit-learn's 1,797 real 8x8 handwritten digits, from python3-sklearn: a seeded
#       1,500 / 297 train / test split, configs/fashion_mnist.yaml's extractor as written: data
#       nobody tuned the detectors on).
#       cancer, digitstab, wine: scikit-learn's breast-cancer table (569 rows x 30 columns, 2
#       classes), the same 1,797 digits as a table of 64 pixel columns and the wine table (178
#       rows x 13 chemical measurements, 3 cultivars), as CSV files through
#       configs/tabular.yaml (an MLP extractor, its 20 % test split): tables and an
#       architecture nobody tuned the detectors on.
# KIND: symmetric | pairwise | instance | projection (data.label_noise.kind); RATE: 0.1, 0.2, 0.4 ...
# Default cells: fmnist12k at 20 % of each kind, and quickstart pairwise 20 %.
# --ceiling: per cell, also what any detector could reach: the same network trained on the
#   clean labels of the samples that were not flipped, asked about the flipped ones (which it
#   never saw): the share of them for which it prefers the true label over the given one.
# --oracle: per cell, what a detector ranking by this recipe's model could reach at best: the
#   recipe trained on the CLEAN labels of every training sample with pretrain.folds=4, each
#   sample scored out of fold by 1 - p(its given, noisy label), the top |truth| flagged: F1, AP
#   and AUROC against the truth (unlike the ceiling, it counts the clean samples a model gets wrong).
# --sweep SEEDS: per cell, also what removing the flagged samples does (the issue's retraining
#   sweep): train_scaled on the cell's filter, arms full / filtered / random at global batches
#   256, 2048 and 8192, seeds 1..SEEDS, 8 epochs of the config's scaled network with the
#   ImageNet stem and zero-initialised residual branches (to fit 2 cores: 72 runs at 60,000
#   images took 1,071 s on a Zen 4 and 2,334 s on an AMX Xeon), LR scaling and LARS as
#   defaulted; 2 ranks a run (mpirun -n 2); then report. The report's paired differences and
#   its table of them go under the detector table; the whole report is
#   DIR/<cell>/report/index.md. Any --set applies to these stages too.
# Peer: cleanlab (its find_label_issues with each filter_by, and get_label_quality_scores for AP
#   and AUROC) on the same /train/probs that Sieve's detectors read, timed in the same run (median
#   of 3), one row each after Sieve's; from the bench environment (scripts/install_deps.sh
#   --bench: SIEVE_BENCH_VENV or .venv-bench), skipped with a line saying so where it is absent.
# Output: DIR (default bench-out/detection)/<cell>/ (the run directory and logs) and
# DIR/table.md. Needs the build (scripts/test.sh or cmake --build build) and the
# dataset-fashion-mnist package for the fmnist cells. A cell whose stage fails gets a row
# saying why (its log in DIR/<cell>/); the others still run, and the exit status is 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"
out="$root/bench-out/detection"
cells="fmnist12k:symmetric:0.2 fmnist12k:pairwise:0.2 fmnist12k:instance:0.2 quickstart:pairwise:0.2"
extra=()
ceiling=0
oracle=0
sweep_seeds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --cells) cells="$2"; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --ceiling) ceiling=1; shift ;;
    --oracle) oracle=1; shift ;;
    --sweep)
      sweep_seeds="$2"; shift 2
      [[ "$sweep_seeds" =~ ^[1-9][0-9]*$ ]] ||
        { echo "bench_detection: --sweep takes a number of seeds (1 or more), not '$sweep_seeds'" >&2; exit 2; } ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "bench_detection: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
tools="$SIEVE_BUILD_DIR/tools"
for t in shard_dataset pretrain extract_features reduce_dims cluster_filter train_scaled report; do
  [ -x "$tools/$t" ] || { echo "bench_detection: $tools/$t not built" >&2; exit 1; }
done

# The detection peer: cleanlab from the bench environment, where it is installed.
peer_py="${SIEVE_BENCH_VENV:-$root/.venv-bench}/bin/python"
if ! { [ -x "$peer_py" ] && "$peer_py" -c "import cleanlab, h5py, sklearn" 2>/dev/null; }; then
  echo "bench_detection: no cleanlab in ${SIEVE_BENCH_VENV:-$root/.venv-bench} (scripts/install_deps.sh --bench): the peer rows are skipped" >&2
  peer_py=""
fi

# The Fashion-MNIST subsets as IDX files (headers rewritten; the test images all kept): the
# first N training images, or with a ratio R > 1 a long tail, class c keeping its first
# round(6000 R^(-c/9)) (R = 10: T-shirt/top all 6,000, Ankle boot 600; 24,523 in all).
fmnist=/usr/share/datasets/fashion-mnist
subset_idx() {  # subset_idx DIR N [R]
  mkdir -p "$1"
  /usr/bin/python3 - "$fmnist" "$1" "$2" "${3:-1}" <<'EOF'
import gzip, os, struct, sys
import numpy as np
src, dst, n, ratio = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def read(name):
    for cand in (name, name + ".gz"):
        p = os.path.join(src, cand)
        if os.path.exists(p):
            return (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
    sys.exit(f"bench_detection: {src}/{name}(.gz) missing (apt-get install dataset-fashion-mnist)")
def split(b):  # header dims and the samples as rows of bytes
    ndim = b[3]
    dims = list(struct.unpack(">" + "I" * ndim, b[4:4 + 4 * ndim]))
    rows = np.frombuffer(b, np.uint8, offset=4 + 4 * ndim).reshape(dims[0], -1)
    return b[:4], dims, rows
labels = split(read("train-labels-idx1-ubyte"))[2][:, 0]
keep = np.arange(min(n, len(labels)))
if ratio > 1:
    classes = int(labels.max()) + 1
    keep = np.sort(np.concatenate([np.flatnonzero(labels == c)[:round(6000 * ratio ** (-c / (classes - 1)))]
                                   for c in range(classes)]))
for stem, train in (("train-images-idx3-ubyte", True), ("train-labels-idx1-ubyte", True),
                    ("t10k-images-idx3-ubyte", False), ("t10k-labels-idx1-ubyte", False)):
    magic, dims, rows = split(read(stem))
    if train:
        rows = rows[keep]
        dims[0] = len(keep)
    head = magic + struct.pack(">" + "I" * len(dims), *dims)
    open(os.path.join(dst, stem), "wb").write(head + rows.tobytes())
EOF
}

# scikit-learn's handwritten digits (8x8, 0-16 grey levels scaled to 0-255) as IDX files: the
# first 1,500 of a seeded permutation train, the other 297 test.
digits_idx() {  # digits_idx DIR
  mkdir -p "$1"
  /usr/bin/python3 - "$1" <<'EOF'
import os, struct, sys
import numpy as np
from sklearn.datasets import load_digits
d = load_digits()
x = np.clip(np.round(d.images * 255 / 16), 0, 255).astype(np.uint8)
y = d.target.astype(np.uint8)
order = np.random.default_rng(0).permutation(len(y))
x, y = x[order], y[order]
def idx(name, a):
    head = struct.pack(">BBBB", 0, 0, 8, a.ndim) + struct.pack(">" + "I" * a.ndim, *a.shape)
    open(os.path.join(sys.argv[1], name), "wb").write(head + a.tobytes())
idx("train-images-idx3-ubyte", x[:1500]); idx("train-labels-idx1-ubyte", y[:1500])
idx("t10k-images-idx3-ubyte", x[1500:]); idx("t10k-labels-idx1-ubyte", y[1500:])
EOF
}

# A scikit-learn table as CSV: one column per feature and the class in `label`.
table_csv() {  # table_csv FILE cancer|digitstab|wine
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import csv, sys
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
d = {"cancer": load_breast_cancer, "digitstab": load_digits, "wine": load_wine}[sys.argv[2]]()
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f)
    w.writerow([f"x{i}" for i in range(d.data.shape[1])] + ["label"])
    for row, label in zip(d.data, d.target):
        w.writerow([repr(float(v)) for v in row] + [int(label)])
EOF
}

# The cell's recipe (pretrain, then extract_features) on the dataset in DIR; logs in DIR.
pretrain_and_extract() {  # pretrain_and_extract DIR WHAT [--set key=value ...]
  local dir="$1" what="$2" stage
  shift 2
  for stage in pretrain extract_features; do
    "$tools/$stage" "${sets[@]}" --set run.dir="$dir" "$@" >"$dir/$stage.log" 2>&1 ||
      { echo "bench_detection: $what: $stage failed; log: $dir/$stage.log" >&2; return 1; }
  done
}

# The ceiling (--ceiling): DIR/ceiling/dataset.h5 keeps the unflipped training samples and
# makes the flipped ones, with their true labels, its test split; the same pretrain recipe
# and extract_features run on it; then each flipped sample's probabilities are read.
ceiling_of() {  # ceiling_of CELL_DIR DATA "KIND RATE"
  local c="$1/ceiling"
  mkdir -p "$c"
  /usr/bin/python3 - "$1/dataset.h5" "$c/dataset.h5" <<'EOF'
import sys, h5py
src, dst = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "w")
flip = src["/train/noise_truth"][:].astype(bool)
for k, v in src.attrs.items():
    dst.attrs[k] = v
for name in src["/train"]:
    a = src["/train/" + name][:]
    if name == "labels":
        a = src["/train/clean_labels"][:]
    if name in ("noise_truth", "noise_kind"):
        a = a * 0
    dst["/train/" + name] = a[~flip]
    dst["/test/" + name] = a[flip]
dst.attrs["fingerprint"] = "ceiling-" + str(src.attrs["fingerprint"])
dst.attrs["num_train"], dst.attrs["num_test"] = int((~flip).sum()), int(flip.sum())
dst.attrs["label_noise_count"] = 0
dst.attrs["label_noise_injected"] = 0
dst.attrs["description"] = "ceiling: the unflipped training samples; the flipped ones as test"
dst.close()
EOF
  pretrain_and_extract "$c" "ceiling of $1" || return 1
  /usr/bin/python3 - "$1/dataset.h5" "$c/features.h5" "$2" "$3" >>"$out/ceiling.md" <<'EOF'
import sys, h5py, numpy as np
d, f = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
flip = d["/train/noise_truth"][:].astype(bool)
ids = d["/train/sample_id"][:][flip]
given = dict(zip(ids, d["/train/labels"][:][flip]))
true = dict(zip(ids, d["/train/clean_labels"][:][flip]))
p, fid = f["/test/probs"][:], f["/test/sample_id"][:]
prefer = np.mean([p[r, true[i]] > p[r, given[i]] for r, i in enumerate(fid)])
print(f"| {sys.argv[3]} | {sys.argv[4]} | {len(fid)} | {100 * prefer:.1f} % |")
EOF
}

# The oracle (--oracle): DIR/oracle/dataset.h5 is the cell's dataset with every training label
# clean; pretrain with 4 folds and extract_features give out-of-fold probabilities.
oracle_of() {  # oracle_of CELL_DIR DATA "KIND RATE"
  local c="$1/oracle"
  mkdir -p "$c"
  /usr/bin/python3 - "$1/dataset.h5" "$c/dataset.h5" <<'EOF'
import sys, h5py
src, dst = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "w")
for k, v in src.attrs.items():
    dst.attrs[k] = v
for split in ("train", "test"):
    for name in src["/" + split]:
        a = src[f"/{split}/{name}"][:]
        if split == "train" and name == "labels":
            a = src["/train/clean_labels"][:]
        if split == "train" and name in ("noise_truth", "noise_kind"):
            a = a * 0
        dst[f"/{split}/{name}"] = a
dst.attrs["fingerprint"] = "oracle-" + str(src.attrs["fingerprint"])
dst.attrs["label_noise_count"] = 0
dst.attrs["label_noise_injected"] = 0
dst.attrs["description"] = "oracle: every training label clean"
dst.close()
EOF
  pretrain_and_extract "$c" "oracle of $1" --set pretrain.folds=4 || return 1
  /usr/bin/python3 - "$1/dataset.h5" "$c/features.h5" "$2" "$3" >>"$out/oracle.md" <<'EOF'
import sys, h5py, numpy as np
d, f = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
truth = dict(zip(d["/train/sample_id"][:], d["/train/noise_truth"][:].astype(bool)))
given = dict(zip(d["/train/sample_id"][:], d["/train/labels"][:]))
ids, p = f["/train/sample_id"][:], f["/train/probs"][:]
t = np.array([truth[i] for i in ids])
g = np.array([given[i] for i in ids])
score = 1 - p[np.arange(len(ids)), g]
order = np.argsort(-score, kind="stable")
T = int(t.sum())
tp = np.cumsum(t[order])
ap = float((tp / np.arange(1, len(ids) + 1) * t[order]).sum() / T)
wrong = float((p.argmax(1)[~t] != g[~t]).mean())
# AUROC: the chance that a flipped sample scores above a clean one (ties count half).
from scipy.stats import rankdata
r = rankdata(score)
auroc = (r[t].sum() - T * (T + 1) / 2) / (T * (len(ids) - T))
print(f"| {sys.argv[3]} | {sys.argv[4]} | {T} | {2 * tp[T - 1] / (2 * T):.3f} | {ap:.3f} | {auroc:.3f} | {100 * wrong:.1f} % |")
EOF
}

# The peer's rows: cleanlab on the cell's /train/probs (the probabilities Sieve's confident,
# consensus and count read), scored against /train/noise_truth as Sieve's rows are.
peer_rows() {  # peer_rows CELL_DIR DATA "KIND RATE"
  "$peer_py" - "$1/dataset.h5" "$1/features.h5" "$2" "$3" <<'EOF'
import sys, time, h5py, numpy as np, cleanlab
from cleanlab.count import num_label_issues
from cleanlab.filter import find_label_issues
from cleanlab.rank import get_label_quality_scores
from sklearn.metrics import average_precision_score, roc_auc_score
d, f = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
row_of = {s: i for i, s in enumerate(d["/train/sample_id"][:])}
rows = np.array([row_of[s] for s in f["/train/sample_id"][:]])
# At rate 0 shard_dataset writes no /train/noise_truth: nothing flipped.
truth = (d["/train/noise_truth"][:].astype(bool)[rows] if "/train/noise_truth" in d
         else np.zeros(len(rows), dtype=bool))
labels = d["/train/labels"][:].astype(np.int64)[rows]
probs = f["/train/probs"][:].astype(np.float64)
probs /= probs.sum(axis=1, keepdims=True)
estimate = num_label_issues(labels, probs)
for filter_by, ranked_by in (("prune_by_noise_rate", "self_confidence"), ("both", "self_confidence"),
                             ("low_self_confidence", "self_confidence"),
                             ("low_normalized_margin", "normalized_margin")):
    seconds = []
    for _ in range(3):
        t0 = time.perf_counter()
        flag = find_label_issues(labels, probs, filter_by=filter_by)
        seconds.append(time.perf_counter() - t0)
    risk = 1 - get_label_quality_scores(labels, probs, method=ranked_by)
    name = f"cleanlab {cleanlab.__version__} {filter_by} (peer)"
    secs = f"{np.median(seconds):.2f}"
    if not truth.any():  # nothing flipped: nothing to score, as in Sieve's rows
        print(f"| {sys.argv[3]} | {sys.argv[4]} | {name} | {flag.sum()} | 0 | {estimate} | - | - | - | - | - | {secs} |")
        continue
    tp = int((flag & truth).sum())
    precision, recall = tp / max(int(flag.sum()), 1), tp / int(truth.sum())
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    print(f"| {sys.argv[3]} | {sys.argv[4]} | {name} | {flag.sum()} | {truth.sum()} | {estimate} | "
          f"{precision:.3f} | {recall:.3f} | {f1:.3f} | {average_precision_score(truth, risk):.3f} | "
          f"{roc_auc_score(truth, risk):.3f} | {secs} |")
EOF
}

# The retraining sweep (--sweep): train_scaled on the cell's filter, then report; the report's
# results section (its paired differences and headline) is appended to DIR/sweep.md.
sweep_of() {  # sweep_of CELL_DIR CELL CONFIG_ARGS...
  local dir="$1" cell="$2"; shift 2
  local seeds
  seeds="[$(seq -s, 1 "$sweep_seeds")]"
  local sets=("$@" --set scaled.model.stem=imagenet --set scaled.epochs=8
              --set scaled.model.zero_init_residual=true
              --set 'scaled.sweep.global_batch=[256,2048,8192]'
              --set 'scaled.sweep.arm=[full,filtered,random]' --set "scaled.sweep.seed=$seeds")
  # The cell's own --set come last again, so that they can change the sweep too.
  sets+=(${extra[@]+"${extra[@]}"})
  local t0=$SECONDS
  if ! mpirun -n 2 "$tools/train_scaled" "${sets[@]}" --sweep-index all >"$dir/train_scaled.log" 2>&1 ||
     ! "$tools/report" "${sets[@]}" >"$dir/report.log" 2>&1; then
    echo "bench_detection: $cell: the sweep failed; logs: $dir/train_scaled.log, $dir/report.log" >&2
    failed_cells+=("$cell sweep")
    return
  fi
  echo "bench_detection: $cell: sweep of $((3 * 3 * sweep_seeds)) runs and report $((SECONDS - t0)) s"
  { printf '\n### %s: what removing the flagged samples does (seeds 1-%s; %s/report/index.md)\n\n' \
      "$cell" "$sweep_seeds" "$dir"
    sed -n '/^## Accuracy vs global batch/,/^Per arm and batch/{/^## \|^Per arm and batch/!p}' \
      "$dir/report/index.md"; } >>"$out/sweep.md"
}

rm -f "$out/ceiling.md" "$out/oracle.md" "$out/sweep.md"
failed_cells=()
printf '| data | noise | detector | flagged | true | estimated | precision | recall | F1 | AP | AUROC | s |\n' >"$out/table.md"
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n' >>"$out/table.md"
for cell in $cells; do
  IFS=: read -r data kind rate <<<"$cell"
  dir="$out/${data}_${kind}_${rate}"
  rm -rf "$dir"
  mkdir -p "$dir"
  case "$data" in
    fmnist12k|fmnistlt|fmnist)
      src="$fmnist"
      if [ "$data" = fmnist12k ]; then src="$out/fmnist12k-idx"; subset_idx "$src" 12000; fi
      if [ "$data" = fmnistlt ]; then src="$out/fmnistlt-idx"; subset_idx "$src" 60000 10; fi
      sets=(--config "$root/configs/fashion_mnist.yaml" --set data.path="$src"
            --set pretrain.model.width=0.125 --set pretrain.epochs=24) ;;
    digits)
      src="$out/digits-idx"
      digits_idx "$src"
      sets=(--config "$root/configs/fashion_mnist.yaml" --set data.path="$src"
            --set 'data.class_names=["0","1","2","3","4","5","6","7","8","9"]') ;;
    cancer|digitstab|wine)
      src="$out/$data.csv"
      table_csv "$src" "$data"
      sets=(--config "$root/configs/tabular.yaml" --set data.path="$src") ;;
    quickstart)
      sets=(--config "$root/configs/quickstart.yaml" --set data.synthetic.label_noise=0
            --set data.synthetic.outliers=0) ;;
    *) echo "bench_detection: unknown data '$data'" >&2; exit 2 ;;
  esac
  sets+=(--set run.dir="$dir" --set data.label_noise.rate="$rate" --set data.label_noise.kind="$kind"
         ${extra[@]+"${extra[@]}"})
  times=()
  stage_failed=""
  for stage in shard_dataset pretrain extract_features reduce_dims cluster_filter; do
    t0=$(date +%s.%N)
    if ! "$tools/$stage" "${sets[@]}" >"$dir/$stage.log" 2>&1; then
      stage_failed="$stage"
      break
    fi
    times+=("$stage $(printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)") s")
  done
  # A cell whose stage fails (e.g. cluster_filter refusing, by filter.max_flagged, to flag
  # most of a class whose labels are mostly wrong) gets a row saying so; the other cells run.
  if [ -n "$stage_failed" ]; then
    echo "bench_detection: $cell: $stage_failed failed; log: $dir/$stage_failed.log" >&2
    tail -3 "$dir/$stage_failed.log" >&2
    why="$(grep -m1 ' error: ' "$dir/$stage_failed.log" | tr '|' '/' | cut -c1-300)"
    printf '| %s | %s %s | %s failed: %s | | | | | | | | | |\n' "$data" "$kind" "$rate" \
      "$stage_failed" "${why:-see its log}" >>"$out/table.md"
    failed_cells+=("$cell")
    continue
  fi
  echo "bench_detection: $cell: ${times[*]}"
  if [ "$ceiling" = 1 ]; then ceiling_of "$dir" "$data" "$kind $rate"; fi
  if [ "$oracle" = 1 ]; then oracle_of "$dir" "$data" "$kind $rate"; fi
  if [ "$sweep_seeds" -gt 0 ]; then sweep_of "$dir" "$cell" "${sets[@]}"; fi
  /usr/bin/python3 - "$dir/filter.h5" "$data" "$kind $rate" >>"$out/table.md" <<'EOF'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
ne = f["/noise_estimate"].attrs if "/noise_estimate" in f else {}
est = ne.get("total", "")
if ne.get("in_doubt", 0):
    est = f"{est} (in doubt)"  # cluster_filter's caution: the early model's own error is as large
if ne.get("test_split_cap", -1) >= 0:
    est = f"{est} (capped at {ne['test_split_cap']})"  # the test split's count (confusion_count.hpp)
if ne.get("test_split_follows_model", 0):
    est = f"{est} (follows the model)"  # held-out samples agree with their labels more than test
if ne.get("test_split_raise", -1) >= 0:
    est = f"{est} (raised to {ne['test_split_raise']})"  # filter.follows_model_count
chosen = f.attrs["method"]
chosen = chosen.decode() if isinstance(chosen, bytes) else chosen
for name in f["/detectors"]:
    a = f["/detectors/" + name].attrs
    mark = " (chosen)" if name == chosen else ""
    secs = f"{a['seconds']:.2f}" if "seconds" in a else ""
    if "truth" not in a:  # rate 0: no label was flipped, so nothing to score; what is flagged is all wrong
        print(f"| {sys.argv[2]} | {sys.argv[3]} | {name}{mark} | {a['flagged']} | 0 | {est} | - | - | - | - | - | {secs} |")
        continue
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {name}{mark} | {a['flagged']} | {a['truth']} | {est} | "
          f"{a['precision']:.3f} | {a['recall']:.3f} | {a['f1']:.3f} | {a['average_precision']:.3f} | "
          f"{a['auroc']:.3f} | {secs} |")
EOF
  if [ -n "$peer_py" ]; then peer_rows "$dir" "$data" "$kind $rate" >>"$out/table.md"; fi
done
if [ -s "$out/ceiling.md" ]; then
  printf '\n| data | noise | flipped | clean model prefers the true label |\n|---|---|---|---|\n' >>"$out/table.md"
  cat "$out/ceiling.md" >>"$out/table.md"
fi
if [ -s "$out/oracle.md" ]; then
  printf '\n| data | noise | flipped | oracle F1 at the true count | oracle AP | oracle AUROC | clean samples the clean model gets wrong |\n|---|---|---|---|---|---|---|\n' >>"$out/table.md"
  cat "$out/oracle.md" >>"$out/table.md"
fi
if [ -s "$out/sweep.md" ]; then cat "$out/sweep.md" >>"$out/table.md"; fi
cat "$out/table.md"
if [ ${#failed_cells[@]} -gt 0 ]; then
  echo "bench_detection: ${#failed_cells[@]} cell(s) failed: ${failed_cells[*]}" >&2
  exit 1
fi
