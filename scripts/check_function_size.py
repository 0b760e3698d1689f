#!/usr/bin/env python3
"""Functions in libcore longer than the limit (issue 28: long functions read as named phases).

    scripts/check_function_size.py [--limit 120] [--root DIR] [--list]

Counts the lines of every function body defined at namespace scope in libcore/**/*.{cpp,cu}:
from the line that opens the definition to its closing brace, comments and blank lines
included (the count clang-tidy's readability-function-size.LineThreshold uses, which agrees
with this script on the files checked when it was written; clang-tidy itself needs a full
parse of every file, minutes on 2 cores, where this takes a second). Lambdas and local
classes count toward the function that holds them.

The code is clang-formatted, so a definition at namespace scope opens with its signature at
column 0 and closes with a '}' at column 0; namespaces, classes, structs, enums and
initialiser lists at column 0 are not functions. Exit 1, with one line per function, when a
function is over the limit and not in the allowance below; also when an allowed function
has grown past its recorded size, so the list only shrinks.
"""
import argparse
import os
import re
import sys

# Functions that were over the limit when the check was introduced, with their size then.
# Split one into named phases and remove its line; never add one.
ALLOWED: dict[str, int] = {}

NOT_FUNCTION = re.compile(r"^(namespace\b|(template\s*<.*>\s*)?(struct|class|union|enum)\b|extern\s+\"C\"|#)")
NAME = re.compile(r"([A-Za-z_][\w:~]*(?:operator\s*\S+?)?)\s*\(")


def functions(path):
    """(name, first line, lines) of each namespace-scope function definition in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line or line[0] in " \t}/#" or NOT_FUNCTION.match(line):
            i += 1
            continue
        # A signature starts here; it may run over several lines until '{' or ';'.
        j, sig = i, line
        while not re.search(r"[{;]\s*(//.*)?$", lines[j]) and j + 1 < len(lines) and j - i < 12:
            j += 1
            sig += " " + lines[j].strip()
        if not re.search(r"\{\s*(//.*)?$", lines[j]) or "(" not in sig or "=" in sig.split("(")[0]:
            i = j + 1
            continue
        m = NAME.search(sig.split("->")[0])
        # The body ends at the next '}' in column 0.
        k = j + 1 if not re.search(r"\}\s*(//.*)?$", lines[j]) else j
        while k < len(lines) and not lines[k].startswith("}"):
            k += 1
        if m:
            out.append((m.group(1), i + 1, k - j))
        i = k + 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--list", action="store_true", help="print every function over the limit")
    a = ap.parse_args()
    bad, seen = [], set()
    libcore = os.path.join(a.root, "libcore")
    for d, _, files in sorted(os.walk(libcore)):
        for fn in sorted(files):
            if not fn.endswith((".cpp", ".cu")):
                continue
            p = os.path.join(d, fn)
            rel = os.path.relpath(p, a.root)
            for name, first, n in functions(p):
                if n <= a.limit:
                    continue
                key = f"{rel}:{name}"
                seen.add(key)
                allowed = ALLOWED.get(key)
                if a.list:
                    print(f"{rel}:{first}: {name}: {n} lines")
                elif allowed is None:
                    bad.append(f"{rel}:{first}: {name} is {n} lines (limit {a.limit}): split it into named phases")
                elif n > allowed:
                    bad.append(f"{rel}:{first}: {name} grew to {n} lines (allowed {allowed} until it is split)")
    for key in sorted(set(ALLOWED) - seen):
        if not a.list:
            print(f"note: {key} is within {a.limit} lines now; remove it from ALLOWED", file=sys.stderr)
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
