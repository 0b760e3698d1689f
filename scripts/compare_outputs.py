#!/usr/bin/env python3
"""Compare two run directories file by file: every HDF5 dataset bitwise (NaN equal to NaN),
every HDF5 attribute and every result.json field, except those that record when, how long or
where (timings, progress, run ids, the run directory's own path). Prints each difference and
exits 1 when there is one. Used by scripts/compare_outputs.sh (a structural change must not
change any output).

  compare_outputs.py OLD_DIR NEW_DIR
"""
import json
import os
import sys

import h5py
import numpy as np

# What differs between two runs of the same binary: when and how long, and the run's id.
VOLATILE_WORDS = ("time", "elapsed", "second", "created", "host", "run_id", "per_s", "progress")


def volatile(name):
    name = name.lower()
    return name.endswith("_s") or any(w in name for w in VOLATILE_WORDS)


def text(v, old_dir=None, new_dir=None):
    """v decoded when bytes; in a string, old_dir (the old run's path) read as new_dir."""
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str) and old_dir:
        v = v.replace(old_dir, new_dir)
    return v


def same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    return a == b


def compare_h5(p, q, old_dir, new_dir, out):
    with h5py.File(p, "r") as fa, h5py.File(q, "r") as fb:
        names_a, names_b = [], []
        fa.visit(names_a.append)
        fb.visit(names_b.append)
        for n in sorted(set(names_a) ^ set(names_b)):
            out.append(f"{p}: {n} only in {'the old' if n in names_a else 'the new'} file")
        for n in ["/"] + sorted(set(names_a) & set(names_b)):
            oa, ob = fa[n], fb[n]
            if isinstance(oa, h5py.Dataset):
                if not same_value(oa[()], ob[()]):
                    out.append(f"{p}: dataset {n} differs")
            for k in sorted(set(oa.attrs) | set(ob.attrs)):
                if volatile(k):
                    continue
                if k not in oa.attrs or k not in ob.attrs:
                    out.append(f"{p}: {n} attribute {k} in one file only")
                    continue
                a = text(oa.attrs[k], old_dir, new_dir)
                b = text(ob.attrs[k])
                if isinstance(a, np.ndarray) and a.dtype.kind in "OSU":
                    a = np.array([text(x, old_dir, new_dir) for x in a.ravel()])
                    b = np.array([text(x) for x in np.asarray(b).ravel()])
                if not same_value(a, b):
                    out.append(f"{p}: {n} attribute {k} differs: {str(a)[:60]} | {str(b)[:60]}")


def compare_json(p, q, out):
    a, b = json.load(open(p)), json.load(open(q))
    for k in sorted(set(a) | set(b)):
        if not volatile(k) and a.get(k) != b.get(k):
            out.append(f"{p}: {k} differs: {a.get(k)} | {b.get(k)}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old_dir, new_dir = (os.path.abspath(d) for d in sys.argv[1:])
    out, compared = [], 0
    for root, dirs, files in os.walk(old_dir):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            q = os.path.join(new_dir, os.path.relpath(p, old_dir))
            if not (f.endswith(".h5") or f == "result.json"):
                continue
            if not os.path.exists(q):
                out.append(f"{q}: missing in the new run")
                continue
            if f.endswith(".h5"):
                compare_h5(p, q, old_dir, new_dir, out)
            else:
                compare_json(p, q, out)
            compared += 1
    for line in out:
        print(line)
    print(f"{compared} files compared (HDF5 and result.json), {len(out)} differences")
    sys.exit(1 if out or compared == 0 else 0)


if __name__ == "__main__":
    main()
