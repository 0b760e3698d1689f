#!/usr/bin/env bash
# Each config key is declared once, beside the code that reads it, and something reads it.
# Two checks over the tree (issue 28: a key declared in one place and read in another drifts):
#   placement  every key declaration (`s.add_int("filter.knn.k", ...)`) in libcore/ and
#              tools/ lies in its section's keys file (the map below: the module that reads
#              it); the prefix-built trainer keys (`s.add_float(p + ".optimizer.lr", ...)`)
#              only in train/keys.cpp;
#   read       every key of the resolved config (`report --get .`: the whole schema with its
#              defaults) is read: `get_<type>("key")` in the C++ (comments aside; a named
#              constant holding the key counts; `get_<type>(p + ".rest")` for the pretrain.*
#              and scaled.* keys, read under either prefix), or `get key` in a script (the job
#              scripts' helper, or a function that hands its argument to it: `opt FLAG key`;
#              `get "slurm.time.$stage"` reads every slurm.time.*). A key
#              that nothing reads is a setting the user changes to no effect. Help texts,
#              messages and comments that name a key do not count.
# The checker is first run on planted trees (a misplaced declaration; a key that only a
# comment and a help text name) so that a checker that can no longer see either fails here
# instead of passing silently.
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
home = {'run': 'config/sections.cpp', 'data': 'data/keys.cpp', 'pretrain': 'train/keys.cpp',
        'features': 'train/keys.cpp', 'scaled': 'train/keys.cpp', 'embed': 'embed/keys.cpp',
        'filter': 'cluster/keys.cpp', 'report': 'report/keys.cpp',
        'slurm': 'pipeline/slurm_keys.cpp'}
types = r'(?:bool|int|float|string|int_list|float_list|string_list|tree)'
decl = re.compile(r'\badd_' + types + r'\(\s*([^,"]*?)\s*"([^"]*)"')
# C++ comments blanked (newlines kept, so line numbers hold); string literals stay: the
# keys are literals.
comment = re.compile(r'//[^\n]*|/\*(?:.|\n)*?\*/')
findings = []
cxx, scripts = [], []  # sources with comments and declarations blanked: where reads are sought
for top in ('libcore', 'tools', 'scripts', 'slurm', 'pipelines', 'python'):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            src = open(p, encoding='utf-8', errors='replace').read()
            if f.endswith(('.cpp', '.hpp', '.cu')):
                code = comment.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), src)
                rel = os.path.relpath(p, os.path.join(root, 'libcore'))
                for m in decl.finditer(code):
                    prefix, key = m.group(1), m.group(2)
                    line = code.count('\n', 0, m.start()) + 1
                    want = 'train/keys.cpp' if prefix else home.get(key.split('.')[0])
                    if want is None:
                        findings.append(f'{p}:{line}: "{key}" is of no known section (add it to this '
                                        'check\'s map and to pipeline_schema())')
                    elif rel != want:
                        findings.append(f'{p}:{line}: "{key}" is declared here, not in its section\'s '
                                        f'libcore/{want} beside its reader')
                cxx.append(decl.sub('', code))
            elif f.endswith(('.sh', '.bash', '.py')):
                scripts.append(re.sub(r'(?m)^\s*#[^\n]*', '', src))
code, script = '\n'.join(cxx), '\n'.join(scripts)
# Script helpers that read a key given as an argument: `get` itself, and any shell function
# whose body passes one of its arguments to it (full_pipeline.sh's `opt FLAG KEY`).
helpers = ['get'] + re.findall(r'(?m)^\s*(\w+)\(\)\s*\{[^}]*?\bget\s+"\$\d"', script)
# Named key constants (constexpr const char* kPairsKey = "data.label_noise.pairs").
constants = {m.group(2): m.group(1) for m in
             re.finditer(r'\b(k\w+)\s*=\s*"([a-z_]+\.[a-z_.]+)"', code)}
# The resolved config's keys: `--get .` prints block YAML, two spaces per level; a tree key
# (a sweep grid, a class map) is a leaf here whatever it holds.
keys, stack = [], []
trees = ('scaled.sweep', 'data.label_noise.pairs')
for raw in open(keys_yaml):
    if not raw.strip() or raw.lstrip().startswith('- '):
        continue
    depth = (len(raw) - len(raw.lstrip(' '))) // 2
    stack = stack[:depth] + [raw.strip().split(':', 1)[0]]
    path = '.'.join(stack)
    if any(path.startswith(t + '.') for t in trees):
        continue
    if raw.rstrip().endswith(':') and path not in trees:
        continue  # a section heading
    keys.append(path)
for key in keys:
    section, rest = key.split('.', 1)
    reads = [r'\bget_' + types + r'\(\s*"' + re.escape(key) + r'"\s*\)']
    if key in constants:
        reads.append(r'\bget_' + types + r'\(\s*' + constants[key] + r'\s*\)')
    if section in ('pretrain', 'scaled'):  # read under the section's prefix: p + ".x.y"
        reads.append(r'\bget_' + types + r'\(\s*\w+\s*\+\s*"\.' + re.escape(rest) + r'"\s*\)')
    in_code = any(re.search(r, code) for r in reads)
    # A script reads a key through `get KEY` (the job scripts' helper) or a helper that
    # passes its argument on to it (`opt partition slurm.partition`); a key under
    # slurm.time also through `get "slurm.time.$stage"`.
    dotted = (r'(?m)\b(?:' + '|'.join(helpers) + r')\s[^\n]*?(?<![\w.])"?' + re.escape(key)
              + r'(?![\w.])')
    parent = key.rsplit('.', 1)[0]
    dynamic = r'\bget\s+"' + re.escape(parent) + r'\.\$' if parent.count('.') else None
    in_script = re.search(dotted, script) or (dynamic and re.search(dynamic, script))
    if not (in_code or in_script):
        findings.append(f'{key}: declared but never read (no get_*("{key}") in the programs, '
                        'no `get ' + key + '` in a script)')
for line in findings:
    print(line)
sys.exit(1 if findings else 0)
PYEOF
}

plant="$(mktemp -d)"
trap 'rm -rf "$plant"' EXIT
mkdir -p "$plant/libcore/cluster" "$plant/libcore/config"
printf 'void add_filter_keys(S& s) {\n  s.add_int("filter.knn.k", 10, "k");\n}\n' \
  >"$plant/libcore/cluster/keys.cpp"
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
printf '  s.add_int("filter.knn.unread", 1, "u");\n' >>"$plant/libcore/cluster/keys.cpp"
printf '// get_int("filter.knn.unread")\nconst char* h = "see filter.knn.unread";\n' \
  >>"$plant/libcore/cluster/program.cpp"
check "$plant" "$plant/keys.yaml" 2>/dev/null >/dev/null &&
  { echo "FAIL: the checker took a comment or a help text for a read" >&2; exit 1; }

"$build/tools/report" --get . >"$plant/all.yaml" || { echo "FAIL: report --get . failed" >&2; exit 1; }
if ! out="$(check "$root" "$plant/all.yaml")"; then
  echo "FAIL: config keys out of place or unread:" >&2
  echo "$out" >&2
  exit 1
fi
echo "every config key declared beside its reader, and read"
