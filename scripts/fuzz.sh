#!/usr/bin/env bash
# Build the libFuzzer targets (clang + ASan/UBSan) and run each for a given time.
#   scripts/fuzz.sh [SECONDS_PER_TARGET=60] [TARGET ...]
# Seed corpora are committed under tests/fuzz/corpus/<name>/ (name = target without the
# fuzz_<module>_ prefix); new inputs found during a run go to build-fuzz/corpus/<name>/ and
# crashes to build-fuzz/crashes/ (an input taking over 10 s counts: a hang). Exit 1 if any
# target crashed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds="${1:-60}"
shift || true
. scripts/env.sh
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DSIEVE_FUZZ=ON -DSIEVE_ENABLE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$build/crashes"
# UBSan findings end the run as a crash (the fuzz build itself leaves them non-fatal).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
failed=0
for t in "${targets[@]}"; do
  name="${t#fuzz_*_}"
  work="$build/corpus/$name"
  mkdir -p "$work"
  [ -d "tests/fuzz/corpus/$name" ] && cp -n tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null || true
  echo "fuzz.sh: $t for ${seconds}s"
  # libhdf5's own error paths leak small buffers; leaks in it are not ours to find. It also
  # mallocs sizes read from the corrupt file and handles NULL (an error, not a crash), so
  # ASan must return NULL for those instead of aborting (allocation-size-too-big).
  leaks=1 asan="${ASAN_OPTIONS:-}"
  case "$t" in
    *h5*) leaks=0
      asan="allocator_may_return_null=1:suppressions=$root/tests/fuzz/asan_hdf5.supp${asan:+:$asan}" ;;
  esac
  if ! ASAN_OPTIONS="$asan" "$build/tests/fuzz/$t" "$work" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -detect_leaks=$leaks \
       -artifact_prefix="$build/crashes/$t-" -print_final_stats=1 2>"$build/$t.log"; then
    echo "fuzz.sh: $t CRASHED; see $build/$t.log and $build/crashes/" >&2
    failed=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$t.log" | sed "s/^/  $t /"
done
exit $failed
