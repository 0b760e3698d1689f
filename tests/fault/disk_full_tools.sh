#!/usr/bin/env bash
# Disk full for every program that writes after shard_dataset and pretrain (those two have
# their own tests): extract_features, reduce_dims, cluster_filter, train_scaled and report,
# each on 1 and 2 ranks with a file size limit on the ranks (`ulimit -f`, SIGXFSZ ignored so
# that writes fail with EFBIG) below the size of the file it writes, over an existing output
# (--overwrite): within a minute, exit 1, one error line naming the file by its own name
# (not the hidden temporary one) agreed by all ranks, the previous output byte-identical, no temporary file
# left. train_scaled starts a run over, so its previous run is gone: no result.json is left
# beside the new run's partial metrics (the report counts it as unfinished).
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch disk_full_tools)"
cd "$root"
pipelines/run_local.sh configs/tiny.yaml --np 1 --set run.dir="$dir/base" --set pretrain.epochs=1 \
  --set scaled.epochs=1 --set 'scaled.sweep.global_batch=[16]' --set 'scaled.sweep.arm=[filtered]' \
  > "$dir/base.log" 2>&1 || { tail -20 "$dir/base.log"; fail "could not make the base run"; }
rm -rf "$dir/base/logs"

# tool, its output (relative to run.dir), the name its error must mention, extra args.
cases=(
  "extract_features|features.h5|features.h5|"
  "reduce_dims|embedding.h5|embedding.h5|"
  "cluster_filter|filter.h5|filter.h5|"
  "train_scaled|sweep/run-0|run-0|--sweep-index 0"
  "report|report|report|"
)
digest() { find "$1" -type f -print0 | sort -z | xargs -0 sha256sum | sed "s|$1||"; }
for c in "${cases[@]}"; do
  IFS='|' read -r tool out name extra <<<"$c"
  # The limit: half the largest file of the output (a file of the output cannot be written).
  largest_kb=$(( $(find "$dir/base/$out" -type f -printf '%s\n' | sort -n | tail -1) / 1024 ))
  limit=$(( largest_kb / 2 ))
  [ "$limit" -ge 1 ] || fail "$tool: output too small for a file size limit ($largest_kb KiB)"
  for np in 1 2; do
    run="$dir/$tool-np$np"
    cp -a "$dir/base" "$run"
    before="$(digest "$run/$out")"
    # shellcheck disable=SC2086
    timeout -s KILL 60 mpirun -n "$np" bash -c 'trap "" XFSZ; ulimit -f "$0" && exec "$@"' "$limit" \
      "$TOOLS/$tool" --config "$CONFIG" --set run.dir="$run" --set pretrain.epochs=1 \
      --set scaled.epochs=1 --set 'scaled.sweep.global_batch=[16]' --set 'scaled.sweep.arm=[filtered]' \
      --overwrite $extra > "$run/$tool.log" 2>&1
    rc=$?
    [ "$rc" -ne 137 ] || { cat "$run/$tool.log"; fail "$tool, $np rank(s): still running after 60 s"; }
    line="$(one_error_line "$tool" "$run/$tool.log")" || exit 1
    echo "  $tool, $np rank(s), limit $limit KiB: exit $rc: $line"
    [ "$rc" -eq 1 ] || { cat "$run/$tool.log"; fail "$tool, $np rank(s): exit $rc, expected 1"; }
    echo "$line" | grep -q "$name" || fail "$tool, $np rank(s): the error does not name $name"
    echo "$line" | grep -q '\.tmp-' && fail "$tool, $np rank(s): the error names a temporary file"
    # All ranks agree on the failure (no "[rank r]" line from a lone rank ending the job).
    echo "$line" | grep -q '\[rank ' && fail "$tool, $np rank(s): the ranks did not agree on the error"
    if [ "$tool" = train_scaled ]; then
      [ -e "$run/$out/result.json" ] && fail "train_scaled, $np rank(s): an old result.json beside a failed redo"
    else
      [ "$before" = "$(digest "$run/$out")" ] || fail "$tool, $np rank(s): the previous $out changed"
    fi
    no_tmp_files "$run"
  done
done
echo "disk_full_tools: OK"
