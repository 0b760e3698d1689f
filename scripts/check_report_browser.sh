#!/usr/bin/env bash
# Open a report in headless chromium and check it renders without JavaScript errors.
#
#   scripts/check_report_browser.sh REPORT_DIR [SHOT_DIR]
#
# For index.html and tsne_interactive.html: loads the page from disk (file://, as a user
# would), fails on console errors ("Uncaught", ERROR:CONSOLE), dumps the DOM after the
# scripts ran and checks that every figure of the report is an <img> whose file exists and
# that the interactive canvas drew its points; writes screenshots to SHOT_DIR (default
# REPORT_DIR/../report-screenshots), including one with a hover tooltip open (#hover=0).
# Exit 0 ok, 1 a check failed, 2 usage, 77 chromium not installed.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 REPORT_DIR [SHOT_DIR]" >&2; exit 2; }
REPORT="$(cd "$1" && pwd)"
SHOTS="${2:-$REPORT/../report-screenshots}"
command -v chromium >/dev/null || { echo "check_report_browser: chromium not installed" >&2; exit 77; }
mkdir -p "$SHOTS"
SHOTS="$(cd "$SHOTS" && pwd)"
fail() { echo "check_report_browser: FAIL: $*" >&2; exit 1; }
[ -s "$REPORT/index.html" ] || fail "$REPORT/index.html missing"

# A private profile, so parallel runs and a user's browser do not share state.
PROFILE="$(mktemp -d)"
trap 'rm -rf "$PROFILE"' EXIT
chrome() {
  chromium --headless --disable-gpu --no-sandbox --user-data-dir="$PROFILE" \
    --enable-logging=stderr --v=0 --virtual-time-budget=5000 "$@"
}

# load PAGE(with #fragment) NAME WIDTH HEIGHT: screenshot + DOM + console check.
load() {
  local url="file://$REPORT/$1" name="$2" log="$SHOTS/$2.log"
  chrome --window-size="$3,$4" --screenshot="$SHOTS/$name.png" "$url" >"$log" 2>&1 \
    || fail "chromium could not render $url (log $log)"
  chrome --dump-dom "$url" >"$SHOTS/$name.dom.html" 2>>"$log" || fail "chromium --dump-dom $url failed"
  if grep -E "Uncaught|ERROR:CONSOLE|CONSOLE[:(][0-9]+\)?\] \"(Error|TypeError|ReferenceError|SyntaxError)" "$log" >&2; then
    fail "console errors on $1 (log $log)"
  fi
  [ -s "$SHOTS/$name.png" ] || fail "no screenshot of $1"
  echo "check_report_browser: $1 ok -> $SHOTS/$name.png"
}

load index.html index 1280 4000
dom="$SHOTS/index.dom.html"
n_img=0
for src in $(grep -o '<img src="[^"]*"' "$dom" | sed 's/<img src="//; s/"$//'); do
  [ -s "$REPORT/$src" ] || fail "index.html shows $src but the file is missing or empty"
  n_img=$((n_img + 1))
done
n_fig=$(ls "$REPORT"/figures/ 2>/dev/null | wc -l)
[ "$n_img" -eq "$n_fig" ] || fail "index.html shows $n_img figures but figures/ holds $n_fig"
grep -q '<table' "$dom" || fail "index.html has no table"
echo "check_report_browser: index.html shows all $n_img figures"

if [ -s "$REPORT/tsne_interactive.html" ]; then
  load tsne_interactive.html tsne_interactive 1200 1000
  load "tsne_interactive.html#hover=0" tsne_hover 1200 1000
  dom="$SHOTS/tsne_interactive.dom.html"
  drawn=$(grep -o 'data-rendered="[0-9]*"' "$dom" | grep -o '[0-9]*' || true)
  [ -n "$drawn" ] && [ "$drawn" -gt 0 ] || fail "interactive page drew no points (data-rendered '$drawn')"
  grep -q 'points (' "$dom" || fail "interactive page status line missing (script did not finish)"
  grep -q 'data-sample="' "$SHOTS/tsne_hover.dom.html" || fail "hover tooltip did not open"
  echo "check_report_browser: interactive page drew $drawn points; hover tooltip opens"
fi
echo "check_report_browser: PASS ($REPORT)"
