#!/usr/bin/env bash
# The resolved config written next to an output (<output stem>.config.yaml) is an output
# like any other: it never replaces a --config file of the same call nor a file Sieve did
# not write, and that is refused up front (exit 2, one line naming the path, no output).
# Before the fix, `extract_features --config tiny.yaml --config RUN/exp.config.yaml
# --output RUN/exp.h5` replaced the user's commented exp.config.yaml. (issue 26, defect 6)
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"

dir="$(scratch config_sidecar)"
make_dataset "$dir"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" --set pretrain.epochs=1 \
  >"$dir/pretrain.log" 2>&1 || { cat "$dir/pretrain.log"; fail "pretrain failed"; }
head -1 "$dir/pretrain/model.config.yaml" | grep -q '^# sieve resolved config' ||
  fail "pretrain's sidecar lacks the '# sieve resolved config' first line"

# refused LOG WHAT PATH...: exit 2 with one error line naming PATH; PATH unchanged.
refused() {
  local rc="$1" log="$2" what="$3"
  [ "$rc" -eq 2 ] || { cat "$log" >&2; fail "$what: exit $rc, expected 2"; }
  one_error_line extract_features "$log" | grep -qF "$4" || fail "$what: error does not name $4"
}

# 1. The sidecar would be a --config input of this very call.
printf '# my experiment: keep this comment\nfeatures:\n  batch: 16  # tuned\n' >"$dir/exp.config.yaml"
cp "$dir/exp.config.yaml" "$dir/exp.config.yaml.orig"
"$TOOLS/extract_features" --config "$CONFIG" --config "$dir/exp.config.yaml" \
  --set run.dir="$dir" --output "$dir/exp.h5" >"$dir/input.log" 2>&1
refused $? "$dir/input.log" "sidecar = --config input" "$dir/exp.config.yaml"
cmp -s "$dir/exp.config.yaml" "$dir/exp.config.yaml.orig" || fail "the user's exp.config.yaml was changed"
[ ! -e "$dir/exp.h5" ] || fail "exp.h5 written although its sidecar was refused"

# 2. The sidecar would replace a file Sieve did not write (not an input of this call).
printf 'my notes\n' >"$dir/other.config.yaml"
"$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$dir" --output "$dir/other.h5" \
  --overwrite >"$dir/foreign.log" 2>&1
refused $? "$dir/foreign.log" "foreign sidecar" "$dir/other.config.yaml"
[ "$(cat "$dir/other.config.yaml")" = "my notes" ] || fail "a foreign other.config.yaml was changed"
[ ! -e "$dir/other.h5" ] || fail "other.h5 written although its sidecar was refused"

# 3. Sieve's own previous sidecar is replaced as before (--overwrite).
for i in 1 2; do
  "$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$dir" --output "$dir/mine.h5" \
    --overwrite >"$dir/mine.log" 2>&1 || { cat "$dir/mine.log"; fail "extract_features run $i failed"; }
done
head -1 "$dir/mine.config.yaml" | grep -q '^# sieve resolved config' || fail "mine.config.yaml not marked"
echo "PASS: config sidecar"
