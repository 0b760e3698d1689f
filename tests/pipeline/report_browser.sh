#!/usr/bin/env bash
# Pipeline test (label pipeline): a report of a fake run directory opens in headless
# chromium without console errors, shows every figure, and its interactive t-SNE page draws
# points and opens a hover tooltip (scripts/check_report_browser.sh). Skips (77) without
# chromium or without the built test_report_tool that makes the fake run.
set -euo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
BUILD="${SIEVE_BUILD_DIR:?SIEVE_BUILD_DIR must point at the build directory}"
command -v chromium >/dev/null || { echo "skip: chromium not installed"; exit 77; }
command -v gnuplot >/dev/null || { echo "skip: gnuplot not installed"; exit 77; }
gen="$BUILD/tests/test_report_tool"
[ -x "$gen" ] || { echo "skip: $gen not built"; exit 77; }
# The end-to-end unit test builds the fake run (HDF5 + result.json) and its report.
"$gen" --gtest_filter='ReportTool.FullRunDirectory*' >/dev/null
report="$BUILD/test-scratch/report_full/report"
[ -s "$report/index.html" ] || { echo "FAIL: no report at $report"; exit 1; }
"$SRC/scripts/check_report_browser.sh" "$report" "$BUILD/test-scratch/report_browser_shots"
