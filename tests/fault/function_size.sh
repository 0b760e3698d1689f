#!/usr/bin/env bash
# No libcore function over 120 lines (issue 28), beyond the shrinking allowance in
# scripts/check_function_size.py. The checker is first run on a planted tree (one function
# of 130 lines, one of 100, a namespace and a struct longer than the limit), so a checker
# that stops seeing long functions fails here instead of passing silently.
set -uo pipefail
root="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY not found" >&2; exit 77; }
check="$root/scripts/check_function_size.py"
plant="$(mktemp -d)"
trap 'rm -rf "$plant"' EXIT
mkdir -p "$plant/libcore/x"
{
  echo "namespace sieve {"
  echo "struct Big {"
  for i in $(seq 1 130); do echo "  int f$i = $i;"; done
  echo "};"
  echo "int long_one(int a,"
  echo "             int b) {"
  for i in $(seq 1 129); do echo "  a += b * $i;"; done
  echo "}"
  echo "int short_one(int a) {"
  for i in $(seq 1 99); do echo "  a += $i;"; done
  echo "}"
  echo "}  // namespace sieve"
} >"$plant/libcore/x/planted.cpp"
out="$("$PY" "$check" --root "$plant" 2>&1)"
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "planted.cpp:.*long_one is 130 lines" <<<"$out"; then
  echo "FAIL: the checker did not report the planted 130-line function (rc $rc): $out" >&2
  exit 1
fi
if grep -q -e short_one -e Big -e "namespace" <<<"$out"; then
  echo "FAIL: the checker reported a short function, a struct or a namespace: $out" >&2
  exit 1
fi
"$PY" "$check" --root "$root" || { echo "FAIL: libcore has functions over the limit (above)" >&2; exit 1; }
echo "function sizes: OK"
