#!/usr/bin/env bash
# shard_dataset on a full disk (a file size limit on the ranks, `ulimit -f`, SIGXFSZ ignored
# so that writes fail with EFBIG), 1 and 2 ranks: within a minute (no spin in a collective),
# exit 1, one error line naming dataset.h5, no dataset.h5 and no temporary file left.
# Before: 1 rank segfaulted in H5F__close_cb (exit 139), 2 ranks spun at 100 % CPU.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch disk_full_shard)"
for np in 1 2; do
  run="$dir/np$np"
  mkdir -p "$run"
  # The tiny dataset is ~200 KiB of images; 64 KiB fits the header but not the data.
  timeout -s KILL 60 mpirun -n "$np" bash -c 'trap "" XFSZ; ulimit -f 64 && exec "$@"' _ \
    "$TOOLS/shard_dataset" --config "$CONFIG" --set run.dir="$run" >"$run/shard.log" 2>&1
  rc=$?
  [ "$rc" -ne 137 ] || { cat "$run/shard.log"; fail "$np rank(s): still running after 60 s"; }
  line="$(one_error_line shard_dataset "$run/shard.log")" || exit 1
  echo "  $np rank(s): exit $rc: $line"
  [ "$rc" -eq 1 ] || { cat "$run/shard.log"; fail "$np rank(s): exit $rc, expected 1"; }
  echo "$line" | grep -q "dataset.h5" || fail "$np rank(s): error does not name dataset.h5"
  [ -e "$run/dataset.h5" ] && fail "$np rank(s): dataset.h5 exists"
  no_tmp_files "$run"
done
echo "disk_full_shard: OK"
