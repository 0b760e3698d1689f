#!/usr/bin/env bash
# A dataset without a test split: nothing measures test accuracy, so result.json holds null
# for it and for everything derived from it (gen_gap, best_test_acc, ...), and the report
# shows "n/a" there. Before the fix gen_gap was 0.0 and the report printed "gen. gap %
# 0.00" next to no test accuracy at all. (issue 26, defect 9)
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"
need_tools train_scaled report
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed" >&2; exit 77; }

dir="$(scratch empty_test_split)"
sets=(--config "$CONFIG" --set run.dir="$dir" --set data.synthetic.test_per_class=0
      --set scaled.epochs=1 --set "scaled.sweep.arm=[full]" --set "scaled.sweep.global_batch=[16]")
"$TOOLS/shard_dataset" "${sets[@]}" >"$dir/shard.log" 2>&1 || { cat "$dir/shard.log"; fail "shard_dataset"; }
"$TOOLS/train_scaled" "${sets[@]}" --sweep-index 0 >"$dir/train.log" 2>&1 ||
  { cat "$dir/train.log"; fail "train_scaled failed without a test split"; }
"$PY" - "$dir/sweep/run-0/result.json" <<'PYEOF' || fail "result.json invents numbers"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("final_test_acc", "best_test_acc", "final_test_loss", "gen_gap"):
    assert k in r and r[k] is None, f"{k} = {r.get(k)!r}, expected null (no test split)"
assert 0.0 <= r["train_acc"] <= 1.0, r["train_acc"]
print("  result.json: test accuracy and gen_gap null, train_acc", r["train_acc"])
PYEOF

# gap_cell REPORT_DIR: the "gen. gap %" cell of the full arm's row in index.md.
gap_cell() {
  "$PY" - "$1/index.md" <<'PYEOF'
import sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("|")]
head = next(r for r in rows if any(c.strip() == "gen. gap %" for c in r))
col = [c.strip() for c in head].index("gen. gap %")
row = next(r for r in rows if len(r) == len(head) and r[1].strip() == "full")
print(row[col].strip())
PYEOF
}
check_report() {  # check_report WHAT: run report, its gap cell must say n/a
  "$TOOLS/report" "${sets[@]}" --overwrite >"$dir/report.log" 2>&1 ||
    { cat "$dir/report.log"; fail "report failed ($1)"; }
  local cell
  cell="$(gap_cell "$dir/report")" || fail "no gen. gap cell in $dir/report/index.md"
  [ "$cell" = "n/a" ] || fail "report shows gen. gap '$cell' for $1, expected n/a"
  grep -q '^full,16,.*,,,,,,,,,,,' "$dir/report/data/accuracy_vs_batch.csv" ||
    fail "accuracy_vs_batch.csv has numbers for a run without a test split ($1)"
  echo "  report: gen. gap n/a ($1)"
}
check_report "result.json of this version"
# An older train_scaled wrote -1 and gen_gap 0.0: the report must not take the 0.0 either.
"$PY" - "$dir/sweep/run-0/result.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
r.update(final_test_acc=-1, best_test_acc=-1, final_test_loss=-1, gen_gap=0.0)
json.dump(r, open(sys.argv[1], "w"), indent=2)
PYEOF
check_report "an older result.json: -1 and gen_gap 0.0"
echo "PASS: empty test split"
