#!/usr/bin/env bash
# MPI only through libcore/comm (comm/comm.hpp's promise: every call checked, one seam).
# Fails when any C++ source under libcore/ or tools/ outside libcore/comm/ names an MPI
# symbol (an MPI_ token in code, comments and string literals aside) or includes mpi.h.
# bench/ is not scanned: bench_core_allreduce measures MPI_Allreduce itself.
# Before scanning the tree, the scanner is run on two planted files, one with a raw call and
# one that only mentions MPI in a comment and a string, so that a scanner that can no longer
# see a call fails here instead of passing silently.
set -uo pipefail
root="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY not found" >&2; exit 77; }

scan() {  # scan DIR...: prints file:line: text for every raw MPI use; exit 1 when any
  "$PY" - "$@" <<'PYEOF'
import os, re, sys
# Comments and string/char literals are blanked (newlines kept, so line numbers hold).
token = re.compile(r'R"([^(\s"\\]{0,16})\((?:.|\n)*?\)\1"|//[^\n]*|/\*(?:.|\n)*?\*/'
                   r'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])+\'')
include = re.compile(r'^\s*#\s*include\s*[<"]mpi\.h[>"]', re.M)
raw = re.compile(r'\bMPI_[A-Za-z]\w*')
hits = 0
for top in sys.argv[1:]:
    for d, dirs, files in os.walk(top):
        dirs.sort()
        if os.path.basename(d) == 'comm' and os.path.basename(os.path.dirname(d)) == 'libcore':
            dirs[:] = []
            continue
        for f in sorted(files):
            if not f.endswith(('.cpp', '.hpp', '.h', '.cu', '.cuh', '.cc')):
                continue
            p = os.path.join(d, f)
            src = open(p, encoding='utf-8', errors='replace').read()
            code = token.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), src)
            lines = src.split('\n')
            found = {src.count('\n', 0, m.start())
                     for m in list(include.finditer(src)) + list(raw.finditer(code))}
            for n in sorted(found):
                print(f'{p}:{n + 1}: {lines[n].strip()}')
            hits += len(found)
sys.exit(1 if hits else 0)
PYEOF
}

plant="$(mktemp -d)"
trap 'rm -rf "$plant"' EXIT
mkdir -p "$plant/call/libcore/x" "$plant/text/libcore/x" "$plant/text/libcore/comm"
printf '#include "comm/comm.hpp"\nvoid f(const sieve::Comm& c) {\n  MPI_Barrier(c.raw());\n}\n' \
  >"$plant/call/libcore/x/a.cpp"
printf '// MPI_Barrier would do\nconst char* s = "MPI_Allreduce";\nauto r = R"(MPI_Send ")";\n' \
  >"$plant/text/libcore/x/a.cpp"
printf '#include <mpi.h>\nvoid g() { MPI_Barrier(MPI_COMM_WORLD); }\n' >"$plant/text/libcore/comm/b.cpp"
scan "$plant/call/libcore" >/dev/null &&
  { echo "FAIL: the scanner missed a raw MPI_Barrier call in a planted file" >&2; exit 1; }
out="$(scan "$plant/text/libcore")" ||
  { echo "FAIL: the scanner flagged MPI in a comment, a string or libcore/comm: $out" >&2; exit 1; }

if ! out="$(scan "$root/libcore" "$root/tools")"; then
  echo "FAIL: MPI used outside libcore/comm (add what is needed to comm/comm.hpp instead):" >&2
  echo "$out" >&2
  exit 1
fi
echo "no raw MPI outside libcore/comm"
