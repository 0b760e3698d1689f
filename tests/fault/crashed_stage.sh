#!/usr/bin/env bash
# A stage started on the output of a stage that crashed: extract_features is killed with
# SIGKILL while it writes (its output exists only under the temporary name), then
# reduce_dims must refuse with exit 1 and one error line naming the missing features.h5,
# and write nothing. Also: an input cut short under its final name (as a copy or a full
# disk could leave it) is refused naming the file.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch crashed_stage)"
make_dataset "$dir"
pretrain_fg "$dir" "$dir/pretrain.log" --set pretrain.epochs=1 ||
  { cat "$dir/pretrain.log"; fail "pretrain failed"; }

# Small batches make extract_features write for longer; kill it as soon as its temporary
# file appears. If it finishes first (fast machine), leave it as a kill between the last
# write and the rename would: the complete file under its temporary name only.
"$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$dir" --set features.batch=1 \
  >"$dir/features.log" 2>&1 &
pid=$!
how=""
for _ in $(seq 1 2000); do
  if compgen -G "$dir/.features.h5.tmp-*" >/dev/null; then
    kill -9 "$pid" 2>/dev/null && how="killed by SIGKILL while writing"
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
wait "$pid"
rc=$?
if [ -z "$how" ]; then
  [ "$rc" -eq 0 ] && [ -e "$dir/features.h5" ] || { cat "$dir/features.log"; fail "extract_features failed (exit $rc)"; }
  mv "$dir/features.h5" "$dir/.features.h5.tmp-$pid"
  how="finished, output left under its temporary name"
else
  [ "$rc" -eq 137 ] || fail "extract_features exit $rc after SIGKILL"
fi
echo "  extract_features $how"
[ -e "$dir/features.h5" ] && fail "features.h5 exists under its final name after a crash"
compgen -G "$dir/.features.h5.tmp-*" >/dev/null || fail "expected a leftover temporary file"

"$TOOLS/reduce_dims" --config "$CONFIG" --set run.dir="$dir" >"$dir/reduce.log" 2>&1
rc=$?
line="$(one_error_line reduce_dims "$dir/reduce.log")" || exit 1
echo "  exit $rc: $line"
[ "$rc" -eq 1 ] || fail "reduce_dims exit $rc on a missing input, expected 1"
echo "$line" | grep -q "$dir/features.h5" || fail "error does not name $dir/features.h5"
[ -e "$dir/embedding.h5" ] && fail "reduce_dims wrote embedding.h5"
compgen -G "$dir/.embedding.h5.tmp-*" >/dev/null && fail "reduce_dims left a temporary file"

# The same input cut short under its final name.
tmp="$(compgen -G "$dir/.features.h5.tmp-*" | head -1)"
if [ "$how" = "killed by SIGKILL while writing" ]; then
  "$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$dir" >"$dir/features2.log" 2>&1 ||
    { cat "$dir/features2.log"; fail "extract_features failed"; }
else
  mv "$tmp" "$dir/features.h5"
fi
rm -f "$dir"/.features.h5.tmp-*
size=$(stat -c %s "$dir/features.h5")
truncate -s $((size * 2 / 3)) "$dir/features.h5"
"$TOOLS/reduce_dims" --config "$CONFIG" --set run.dir="$dir" >"$dir/reduce2.log" 2>&1
rc=$?
line="$(one_error_line reduce_dims "$dir/reduce2.log")" || exit 1
echo "  truncated input: exit $rc: $line"
[ "$rc" -eq 1 ] || fail "reduce_dims exit $rc on a truncated input, expected 1"
echo "$line" | grep -q "features.h5" || fail "error does not name features.h5"
[ -e "$dir/embedding.h5" ] && fail "reduce_dims wrote embedding.h5 from a truncated input"
no_tmp_files "$dir"
echo "crashed_stage: OK"
