#!/usr/bin/env bash
# Each config key is declared once, beside the code that reads it, and something reads it.
# Two checks over the tree (issue 28: a key declared in one place and read in another drifts):
#   placement  every literal key declaration (`s.add_int("filter.knn.k", ...)`) in libcore/
#              lies in its section's options file (the map below); the prefix-built trainer
#              keys (`s.add_float(p + ".optimizer.lr", ...)`) only in train/options.cpp;
#   read       every key of the resolved config (`report --get .`: the whole schema with its
#              defaults) is named somewhere other than its declaration: a C++ literal "key"
#              (or ".rest" for the trainer keys read under a prefix); a slurm.* key, which
#              only the job scripts read, by its dotted name in a script (`get slurm.mpi`;
#              `get "slurm.time.$stage"` reads every slurm.time.*).
#              A key that nothing reads is a setting the user changes to no effect.
# The checker is first run on planted trees (a misplaced declaration; an unread key) so that a
# checker that can no longer see either fails here instead of passing silently.
set -uo pipefail
root="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
build="${SIEVE_BUILD_DIR:-$root/build}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY not found" >&2; exit 77; }
[ -x "$build/tools/report" ] || { echo "FAIL: $build/tools/report not built" >&2; exit 1; }

check() {  # check ROOT KEYS_YAML: prints each finding; exit 1 when any
  "$PY" - "$@" <<'PYEOF'
import os, re, sys
root, keys_yaml = sys.argv[1], sys.argv[2]
home = {'run': 'config/sections.cpp', 'data': 'data/options.cpp', 'pretrain': 'train/options.cpp',
        'features': 'train/options.cpp', 'scaled': 'train/options.cpp',
        'embed': 'embed/options.cpp', 'filter': 'cluster/options.cpp',
        'report': 'report/options.cpp', 'slurm': 'pipeline/slurm_options.cpp'}
decl = re.compile(r'\badd_(?:bool|int|float|string|int_list|float_list|string_list|tree)'
                  r'\(\s*(p \+ )?"([^"]*)"')
findings = []
texts = []    # every C++ source with its declarations blanked: where reads are looked for
scripts = []  # the shell and Python sources
for top in ('libcore', 'tools', 'scripts', 'slurm', 'pipelines', 'python'):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(('.cpp', '.hpp', '.cu', '.sh', '.bash', '.py')):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, os.path.join(root, 'libcore'))
            src = open(p, encoding='utf-8', errors='replace').read()
            if top == 'libcore' and f.endswith(('.cpp', '.hpp', '.cu')):
                for m in decl.finditer(src):
                    key, line = m.group(2), src.count('\n', 0, m.start()) + 1
                    want = 'train/options.cpp' if m.group(1) else home.get(key.split('.')[0])
                    if want is None:
                        findings.append(f'{p}:{line}: "{key}" is of no known section (add it to '
                                        'this check\'s map and to pipeline_schema())')
                    elif rel != want:
                        findings.append(f'{p}:{line}: "{key}" is declared here, not beside its '
                                        f'reader in libcore/{want}')
            (scripts if f.endswith(('.sh', '.bash', '.py')) else texts).append(decl.sub('', src))
text, script = '\n'.join(texts), '\n'.join(scripts)
# The resolved config's keys: `--get .` prints block YAML, two spaces per level; a tree key
# (a sweep grid, a class map) is a leaf here whatever it holds.
keys, stack = [], []
trees = ('scaled.sweep', 'data.label_noise.pairs')
for raw in open(keys_yaml):
    if not raw.strip() or raw.lstrip().startswith('- '):
        continue
    depth = (len(raw) - len(raw.lstrip(' '))) // 2
    name = raw.strip().split(':', 1)[0]
    stack = stack[:depth] + [name]
    path = '.'.join(stack)
    if any(path.startswith(t + '.') for t in trees):
        continue
    if raw.rstrip().endswith(':') and path not in trees:
        continue  # a section heading
    keys.append(path)
for key in keys:
    section, rest = key.split('.', 1)
    names = [f'"{key}"']
    if section in ('pretrain', 'scaled'):
        names.append(f'".{rest}"')  # read under the section prefix: p + ".optimizer.lr"
    dotted = r'(?<![\w.])' + re.escape(key) + r'(?![\w.])'
    dynamic = re.escape(key.rsplit('.', 1)[0]) + r'\.\$'
    # Only the job scripts read slurm.*; any other key a script names (`--set
    # pretrain.folds=4`) is set there, so it must be read by the programs.
    in_script = section == 'slurm' and (re.search(dotted, script) or re.search(dynamic, script))
    if not (any(n in text for n in names) or in_script):
        findings.append(f'{key}: declared but never read (no {" or ".join(names)} in the C++ '
                        'outside its declaration, nor the name in a script)')
for line in findings:
    print(line)
sys.exit(1 if findings else 0)
PYEOF
}

plant="$(mktemp -d)"
trap 'rm -rf "$plant"' EXIT
mkdir -p "$plant/libcore/cluster" "$plant/libcore/config"
printf 'void add_filter_keys(S& s) {\n  s.add_int("filter.knn.k", 10, "k");\n}\n' \
  >"$plant/libcore/cluster/options.cpp"
printf 'int k(const Config& c) { return c.get_int("filter.knn.k"); }\n' \
  >"$plant/libcore/cluster/program.cpp"
printf 'filter:\n  knn:\n    k: 10\n' >"$plant/keys.yaml"
check "$plant" "$plant/keys.yaml" 2>/dev/null >/dev/null ||
  { echo "FAIL: the checker rejects a key declared and read where it should be" >&2; exit 1; }
printf 'void f(S& s) { s.add_int("filter.knn.k", 10, "k"); }\n' >"$plant/libcore/config/x.cpp"
check "$plant" "$plant/keys.yaml" 2>/dev/null >/dev/null &&
  { echo "FAIL: the checker missed a declaration outside its section's options file" >&2; exit 1; }
rm "$plant/libcore/config/x.cpp"
printf 'filter:\n  knn:\n    k: 10\n    unread: 1\n' >"$plant/keys.yaml"
printf '  s.add_int("filter.knn.unread", 1, "u");\n' >>"$plant/libcore/cluster/options.cpp"
check "$plant" "$plant/keys.yaml" 2>/dev/null >/dev/null &&
  { echo "FAIL: the checker missed a key that nothing reads" >&2; exit 1; }

"$build/tools/report" --get . >"$plant/all.yaml" 2>/dev/null ||
  { echo "FAIL: report --get . failed" >&2; exit 1; }
if ! out="$(check "$root" "$plant/all.yaml")"; then
  echo "FAIL: config keys out of place or unread:" >&2
  echo "$out" >&2
  exit 1
fi
echo "every config key declared beside its reader, and read"
