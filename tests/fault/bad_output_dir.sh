#!/usr/bin/env bash
# Output locations that cannot be written, for a 2-rank pretrain: the output's directory is
# a regular file, or a directory without write permission (run as an unprivileged user when
# the test runs as root, since root ignores permissions). Each: exit 1 (runtime problem),
# one error line naming the output path, nothing written, no hang.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch bad_output_dir)"
make_dataset "$dir"

# 1. The directory of --output is a regular file.
echo "not a directory" >"$dir/plainfile"
timeout 120 mpirun -n 2 "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" \
  --output "$dir/plainfile/model.h5" >"$dir/file.log" 2>&1
rc=$?
line="$(one_error_line pretrain "$dir/file.log")" || exit 1
echo "  dir is a file: exit $rc: $line"
[ "$rc" -eq 1 ] || fail "dir is a file: exit $rc, expected 1"
echo "$line" | grep -q "$dir/plainfile" || fail "dir is a file: error does not name $dir/plainfile"
[ "$(cat "$dir/plainfile")" = "not a directory" ] || fail "plainfile changed"

# 2. A directory without write permission.
mkdir -p "$dir/ro"
chmod 555 "$dir/ro"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  command -v setpriv >/dev/null || { echo "SKIP part 2: root and no setpriv"; echo "bad_output_dir: OK"; exit 0; }
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
# One rank, no mpirun: an unprivileged mpirun needs a writable OpenMPI session directory (its
# per-job temporary directory), which this test does not set up.
( cd /tmp && "${as_user[@]}" env HOME=/tmp "$TOOLS/pretrain" --config "$CONFIG" \
    --set run.dir="$dir" --output "$dir/ro/model.h5" ) >"$dir/ro.log" 2>&1
rc=$?
line="$(one_error_line pretrain "$dir/ro.log")" || exit 1
echo "  dir not writable: exit $rc: $line"
[ "$rc" -eq 1 ] || fail "dir not writable: exit $rc, expected 1"
echo "$line" | grep -q "$dir/ro" || fail "dir not writable: error does not name $dir/ro"
[ -z "$(ls -A "$dir/ro")" ] || fail "something was written into $dir/ro"
chmod 755 "$dir/ro"
echo "bad_output_dir: OK"
