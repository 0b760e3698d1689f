#!/usr/bin/env bash
# No orphaned temporaries (issue 26, defect 7). SIGTERM (Slurm's time limit) or SIGINT
# (Ctrl-C) to extract_features while it writes, or SIGTERM to report, used to leave
# `.features.h5.tmp-PID` / `.report.tmp-PID/` forever. Now the tool removes its temporaries
# and still dies of the signal (exit 128 + N). Temporaries of a process killed outright
# (SIGKILL) are removed by the next tool writing into that directory once that process is
# gone: only Sieve's names, of this host; a live process's and another host's stay.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
[ -x "$TOOLS/report" ] || { echo "SKIP: report not built" >&2; exit 77; }
dir="$(scratch signal_cleanup)"
run="$dir/run"
make_dataset "$run"
host="$(hostname)"
true &
dead=$!  # a pid of this host that is not running
wait "$dead"
# A stage's lock sweeps its directory: a killed pretrain's temporary goes.
mkdir -p "$run/pretrain"
touch "$run/pretrain/model_early.json.tmp-$dead-$host"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" "${TRAIN_SETS[@]}" --set pretrain.epochs=1 \
  >"$dir/pretrain.log" 2>&1 || { cat "$dir/pretrain.log"; fail "pretrain failed"; }
[ -e "$run/pretrain/model_early.json.tmp-$dead-$host" ] && fail "pretrain left a dead run's temporary"

# signalled SIG WANT_RC GLOB CMD...: start CMD, send SIG once GLOB exists, expect WANT_RC
# and nothing matching GLOB (nor a lock) afterwards.
signalled() {
  local sig="$1" want="$2" glob="$3" pid rc
  shift 3
  set -m  # job control: a background job that does not ignore SIGINT, as at a terminal
  "$@" >"$dir/sig.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 3000); do
    compgen -G "$glob" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.005
  done
  compgen -G "$glob" >/dev/null || { cat "$dir/sig.log"; fail "$1: no temporary $glob appeared"; }
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  set +m
  echo "  $(basename "$1") SIG$sig: exit $rc"
  [ "$rc" -eq "$want" ] || { cat "$dir/sig.log"; fail "$1 SIG$sig: exit $rc, expected $want"; }
  compgen -G "$glob" >/dev/null && fail "$1 SIG$sig: left $(compgen -G "$glob")"
  compgen -G "$run/.*.lock" >/dev/null && fail "$1 SIG$sig: left a lock $(compgen -G "$run/.*.lock")"
  return 0
}
features=("$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$run" --set features.batch=1 --overwrite)
signalled TERM 143 "$run/.features.h5.tmp-*" "${features[@]}"
signalled INT 130 "$run/.features.h5.tmp-*" "${features[@]}"
"${features[@]}" >"$dir/features.log" 2>&1 || { cat "$dir/features.log"; fail "extract_features failed"; }
signalled TERM 143 "$run/.report.tmp-*" "$TOOLS/report" --config "$CONFIG" --set run.dir="$run"

# Orphans: of a dead pid of this host (removed), of this live shell and of another host (kept).
mkdir "$run/.report.tmp-$dead-$host"
touch "$run/.report.tmp-$dead-$host/index.html" "$run/.features.h5.tmp-$dead-$host" \
  "$run/config.yaml.tmp-$dead-$host" "$run/.features.h5.tmp-$$-$host" \
  "$run/.features.h5.tmp-$dead-elsewhere.invalid" "$run/.features.h5.tmp-$dead"
"${features[@]}" >"$dir/orphans.log" 2>&1 || { cat "$dir/orphans.log"; fail "extract_features failed"; }
for gone in ".report.tmp-$dead-$host" ".features.h5.tmp-$dead-$host" "config.yaml.tmp-$dead-$host"; do
  [ -e "$run/$gone" ] && fail "orphan $gone left"
  grep -q "removed $run/$gone: a temporary of process $dead" "$dir/orphans.log" || fail "no log line for $gone"
done
for kept in ".features.h5.tmp-$$-$host" ".features.h5.tmp-$dead-elsewhere.invalid" ".features.h5.tmp-$dead"; do
  [ -e "$run/$kept" ] || fail "$kept removed (not a dead process's of this host)"
done
echo "  orphans of pid $dead removed; the live, foreign-host and unsuffixed ones kept"
echo "signal_cleanup: OK"
