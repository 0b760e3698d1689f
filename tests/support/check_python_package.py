"""The sieve_pipeline package against h5py's direct reads (tests/pipeline/python_package.sh).
Usage: check_python_package.py RUN_DIR OTHER_RUN_DIR SOURCE_TREE
RUN_DIR: a tiny run through cluster_filter (sharded dataset); OTHER_RUN_DIR: a dataset of
another seed. Run with torch made unimportable: nothing here may need it."""
import os
import pickle
import sys

import h5py
import numpy as np

sys.modules["torch"] = None  # `import torch` now raises ImportError, as where it is absent
import sieve_pipeline as sp  # noqa: E402

run_dir, other_dir, source = sys.argv[1:4]


def check(cond, msg):
    if not cond:
        sys.exit(f"check_python_package: FAIL: {msg}")


# The installed copy is the one imported, not the checkout's sources.
check("site-packages" in sp.__file__ and
      not os.path.abspath(sp.__file__).startswith(os.path.join(os.path.abspath(source), "python")),
      f"imported from the source tree: {sp.__file__}")
check(sys.modules.get("torch") is None, "importing sieve_pipeline imported torch")
try:
    sp.SieveDataset
    check(False, "SieveDataset resolved without torch")
except ImportError:
    pass

run = sp.Run(run_dir)
ds_path, flt_path = os.path.join(run_dir, "dataset.h5"), os.path.join(run_dir, "filter.h5")
with h5py.File(ds_path, "r") as d, h5py.File(flt_path, "r") as f, \
        h5py.File(os.path.join(run_dir, "features.h5"), "r") as feat:
    ids = d["/train/sample_id"][()]
    check(np.array_equal(run.sample_ids, ids), "sample_ids are not the dataset's train order")
    check(np.array_equal(run.labels, d["/train/labels"][()]), "labels differ from the dataset's")
    check(np.array_equal(run.noise_truth, d["/train/noise_truth"][()] == 1), "noise_truth differs")
    by_id = {int(s): i for i, s in enumerate(f["/sample_id"][()])}
    rows = np.array([by_id[int(s)] for s in ids])
    keep, rkeep = f["/keep"][()][rows] == 1, f["/random_keep"][()][rows] == 1
    check(np.array_equal(run.keep, keep), "keep mask differs from h5py's /keep")
    check(np.array_equal(run.random_keep, rkeep), "random_keep differs from h5py's")
    check(0 < keep.sum() < len(keep), f"degenerate keep mask ({keep.sum()} of {len(keep)})")
    method = f.attrs["method"]
    method = method.decode() if isinstance(method, bytes) else str(method)
    check(run.detector == method, f"detector {run.detector}, the filter's method {method}")
    names = sorted(f["/detectors"].keys())
    check(run.detectors == names and len(names) >= 2, f"detectors {run.detectors} vs {names}")
    for n in names:
        check(np.array_equal(run.score(n), f[f"/detectors/{n}/score"][()][rows], equal_nan=True),
              f"{n} score differs")
        check(np.array_equal(run.flag(n), f[f"/detectors/{n}/flag"][()][rows] == 1), f"{n} flag differs")
    fby = {int(s): i for i, s in enumerate(feat["/train/sample_id"][()])}
    want = np.argmax(feat["/train/probs"][()], axis=1)[[fby[int(s)] for s in ids]]
    check(np.array_equal(run.suggested_labels, want), "suggested labels are not argmax of /train/probs")
    one = int(ids[5])
    row = run.sample(one)
    check(row["keep"] == bool(keep[5]) and row["label"] == int(d["/train/labels"][5]),
          f"sample({one}) = {row}")
    images = d["/train/images"]
    mean, std = d.attrs["mean"], d.attrs["std"]
    kept_rows = np.flatnonzero(keep)
    # The sharded dataset read row by row, as a DataLoader worker would.
    rows_reader = sp.DatasetRows(ds_path, "train", kept_rows)
    check(len(rows_reader) == keep.sum(), "filtered rows: wrong count")
    reader = pickle.loads(pickle.dumps(rows_reader))  # a worker's copy: opens its own handle
    x, y, sid = reader.read([3, 0, 3])
    ref = (np.moveaxis(images[kept_rows[0]], -1, 0) / 255.0 - mean[:, None, None]) / std[:, None, None]
    check(np.allclose(x[1], ref, atol=1e-5), "row 0 of the filtered arm is not the dataset's image")
    check(np.array_equal(sid, ids[kept_rows[[3, 0, 3]]]), "sample ids of read rows")
    check(np.array_equal(y, d["/train/labels"][()][kept_rows[[3, 0, 3]]]), "labels of read rows")
print(f"  read: {len(run)} samples, {int(run.keep.sum())} kept, detectors {', '.join(run.detectors)}")

# pretrain's held-out samples: marked, and their margins recorded (from evaluation).
with h5py.File(os.path.join(run_dir, "pretrain", "dynamics.h5"), "r") as g:
    by_id = {int(s): i for i, s in enumerate(g["/sample_id"][()])}
    held = g["/heldout"][()][[by_id[int(s)] for s in run.sample_ids]] == 1
check(np.array_equal(run.heldout, held), "heldout differs from h5py's /heldout")
check(0 < held.sum() < len(held), f"held-out samples: {int(held.sum())} of {len(held)}")
check(np.all(np.isfinite(run.margins[:, held])), "a held-out sample has no recorded margin")

# A filter of another dataset is refused, naming both files.
other_ds = os.path.join(other_dir, "dataset.h5")
try:
    sp.Run(other_dir, filter=flt_path)
    check(False, "a filter of another dataset was accepted")
except sp.LineageError as e:
    check(flt_path in str(e) and other_ds in str(e), f"the error names not both files: {e}")
    print(f"  refused: {e}")
# A derived file without a dataset_fingerprint (hand-made, older) and a file of another
# schema are refused too, as the C++ readers refuse them.
import shutil, tempfile  # noqa: E401,E402
tmp = tempfile.mkdtemp(dir=other_dir)
bare = os.path.join(tmp, "filter.h5")
shutil.copy(flt_path, bare)
with h5py.File(bare, "r+") as f:
    del f.attrs["dataset_fingerprint"]
for kwargs, want in (({"filter": bare}, "no 'dataset_fingerprint'"),
                     ({"filter": os.path.join(run_dir, "features.h5")}, "expected 'sieve.filter/1'")):
    try:
        sp.Run(run_dir, **kwargs)
        check(False, f"accepted {kwargs}")
    except sp.SieveFileError as e:
        check(want in str(e), f"{kwargs}: {e}")
try:
    sp.Run(run_dir, dataset=other_ds)
    check(False, "another dataset under this run's derived files was accepted")
except sp.LineageError as e:
    check(other_ds in str(e), f"the error does not name the dataset: {e}")

# KeepMaskSampler: exactly the kept samples, by identity and through a user's id list.
kept_ids = np.sort(ids[keep])
s = sp.KeepMaskSampler(run)
check(list(s) == kept_ids.tolist(), "identity sampler indices are not the kept sample ids")
user_ids = ids[::-1].copy()  # the user's dataset holds the samples in another order
s = sp.KeepMaskSampler(run_dir, "filtered", user_ids)
check(np.array_equal(np.array(list(s)), np.flatnonzero(np.isin(user_ids, kept_ids))),
      "sampler indices over a user's id list")
check(np.array_equal(np.sort(user_ids[list(s)]), kept_ids), "mapped ids are not the kept ones")
check(s.missing == 0, f"missing {s.missing}")
s_r = sp.KeepMaskSampler(run, "random")
check(list(s_r) == np.sort(ids[rkeep]).tolist(), "random arm indices")
# Two ranks: each as many indices; together exactly the kept ones (padding repeats the
# first when the count is odd; drop_last=True gives disjoint parts without it).
for shuffle in (False, True):
    parts = [list(sp.KeepMaskSampler(run, shuffle=shuffle, seed=3, num_replicas=2, rank=r))
             for r in (0, 1)]
    check(len(parts[0]) == len(parts[1]), "ranks got different counts")
    allp = parts[0] + parts[1]
    check(set(allp) == set(kept_ids.tolist()), "ranks do not cover the kept ids")
    check(len(allp) - len(set(allp)) == len(kept_ids) % 2, "ranks overlap beyond the padding")
    parts = [set(sp.KeepMaskSampler(run, shuffle=shuffle, seed=3, num_replicas=2, rank=r,
                                    drop_last=True)) for r in (0, 1)]
    check(not (parts[0] & parts[1]), "drop_last ranks overlap")
    check(len(parts[0] | parts[1]) == len(kept_ids) // 2 * 2, "drop_last ranks cover too little")
a = sp.KeepMaskSampler(run, shuffle=True, seed=3)
e0 = list(a)
a.set_epoch(1)
check(sorted(e0) == sorted(a) and e0 != list(a), "set_epoch gives no new permutation")
print("check_python_package: OK")
