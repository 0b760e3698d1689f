#!/usr/bin/python3
"""Peer side of scripts/bench_embed.sh: data generation, scikit-learn runs, and the one
10-NN preservation measure used for BOTH embeddings (so the two figures are comparable).

  gen      write a sieve.features/1 file of Gaussian clusters
  tsne     scikit-learn TSNE (Barnes-Hut) on it; time + 10-NN preservation
  pca      scikit-learn PCA (full SVD solver, as sieve's exact eigensolver); time
  eval     10-NN preservation of a sieve.embedding/1 file against the same input

10-NN preservation: for every point, the fraction of its 10 nearest neighbours in the
input space (exact, self excluded) that are also among its 10 nearest in the embedding.
Above SAMPLE_ABOVE points the all-pairs input search is out of reach (10^12 distances at
1 M): the mean is then taken over a fixed seeded sample of SAMPLE_POINTS query points, whose
10 nearest neighbours among ALL points are found by brute force in the input space and
exactly in the embedding; the output line then carries sampled=<points> before knn10=.
Run with Debian's /usr/bin/python3 (python3-sklearn 1.2, numpy, h5py).
"""
import argparse
import contextlib
import os
import sys
import time

import h5py
import numpy as np


def gen(a):
    rng = np.random.default_rng(a.seed)
    centers = rng.normal(0.0, a.center_scale, size=(a.clusters, a.dims))
    labels = rng.integers(0, a.clusters, size=a.n).astype(np.int32)
    x = (centers[labels] + rng.normal(0.0, 1.0, size=(a.n, a.dims))).astype(np.float32)
    with h5py.File(a.out, "w") as f:
        f.attrs["schema"] = "sieve.features/1"
        f.attrs["sieve_version"] = "bench"
        f.attrs["config"] = ""
        f.attrs["layer"] = "synthetic"
        f.attrs["model"] = "gaussian-clusters"
        f.create_dataset("/train/features", data=x)
        f.create_dataset("/train/labels", data=labels)
        f.create_dataset("/train/sample_id", data=np.arange(a.n, dtype=np.int64))


def load_x(path, n=None):
    with h5py.File(path, "r") as f:
        x = f["/train/features"][...]
    return x if n is None else x[:n]


def knn(x, k):
    from sklearn.neighbors import NearestNeighbors
    nn = NearestNeighbors(n_neighbors=k + 1, n_jobs=2).fit(x)
    idx = nn.kneighbors(x, return_distance=False)
    return idx[:, 1:]  # drop self


SAMPLE_ABOVE = 100000  # points; above this, preservation over a sample of query points
SAMPLE_POINTS = 10000
SAMPLE_SEED = 20240516


def sample_rows(n):
    """The query rows of the preservation: all, or a fixed seeded sample (sorted)."""
    if n <= SAMPLE_ABOVE:
        return None
    rng = np.random.default_rng(SAMPLE_SEED)
    return np.sort(rng.choice(n, size=SAMPLE_POINTS, replace=False))


def knn_of_rows(x, rows, k, algorithm):
    """k nearest neighbours among all rows of x of the rows `rows`, self excluded (dropped
    by id, so exact duplicates of a row cannot push it out of place)."""
    from sklearn.neighbors import NearestNeighbors
    nn = NearestNeighbors(n_neighbors=k + 1, algorithm=algorithm, n_jobs=2).fit(x)
    idx = nn.kneighbors(x[rows], return_distance=False)
    out = np.empty((len(rows), k), dtype=idx.dtype)
    for r, (i, row) in enumerate(zip(rows, idx)):
        others = row[row != i]
        out[r] = others[:k]
    return out


def input_knn(path, x, k=10):
    """Input-space 10-NN (of the sampled rows above SAMPLE_ABOVE), cached next to the data
    (it is the same for every embedding)."""
    rows = sample_rows(len(x))
    tag = "" if rows is None else f".sample{SAMPLE_POINTS}s{SAMPLE_SEED}"
    cache = f"{path}.knn{k}.n{len(x)}{tag}.npy"
    if os.path.exists(cache):
        return np.load(cache)
    idx = knn(x, k) if rows is None else knn_of_rows(x, rows, k, "brute")
    np.save(cache, idx)
    return idx


def preservation(in_idx, emb, k=10):
    rows = sample_rows(len(emb))
    emb = emb.astype(np.float64)
    out_idx = knn(emb, k) if rows is None else knn_of_rows(emb, rows, k, "auto")
    hits = [len(np.intersect1d(a, b, assume_unique=True)) for a, b in zip(in_idx, out_idx)]
    return float(np.mean(hits)) / k


def sampled_note(n):
    """'sampled=<points> ' before knn10= when the preservation is taken over a sample."""
    return "" if sample_rows(n) is None else f"sampled={SAMPLE_POINTS} "


def tsne(a):
    from sklearn.manifold import TSNE
    x = load_x(a.input, a.subset)
    t0 = time.time()
    kw = dict(n_components=2, perplexity=a.perplexity, init="pca", learning_rate="auto",
              method="barnes_hut", angle=0.5, n_jobs=2, random_state=a.seed)
    try:  # scikit-learn >= 1.5 calls it max_iter (n_iter is gone in 1.7)
        model = TSNE(max_iter=a.iterations, **kw)
    except TypeError:
        model = TSNE(n_iter=a.iterations, **kw)
    emb = model.fit_transform(x)
    secs = time.time() - t0
    pres = preservation(input_knn(a.input, x), emb)
    print(f"sklearn_tsne n={len(x)} seconds={secs:.2f} {sampled_note(len(x))}knn10={pres:.4f}",
          flush=True)


def opentsne(a):
    """openTSNE (FIt-SNE algorithm) with its defaults: the peer a user would pick today."""
    from openTSNE import TSNE as OpenTSNE
    x = load_x(a.input, a.subset)
    t0 = time.time()
    # verbose: openTSNE's own phase timings (k-NN, affinities, each optimisation phase), to
    # stderr so that stdout keeps the one result line the bench scripts parse.
    with contextlib.redirect_stdout(sys.stderr):
        emb = np.asarray(OpenTSNE(n_components=2, perplexity=a.perplexity, n_jobs=2,
                                  random_state=a.seed, verbose=a.verbose).fit(x))
    secs = time.time() - t0
    pres = preservation(input_knn(a.input, x), emb)
    print(f"opentsne n={len(x)} seconds={secs:.2f} {sampled_note(len(x))}knn10={pres:.4f}",
          flush=True)


def pca(a):
    from sklearn.decomposition import PCA
    x = load_x(a.input)
    t0 = time.time()
    PCA(n_components=a.components, svd_solver="full").fit_transform(x)
    full = time.time() - t0
    t0 = time.time()
    PCA(n_components=a.components, svd_solver="randomized", random_state=0).fit_transform(x)
    rnd = time.time() - t0
    print(f"sklearn_pca full={full:.3f} randomized={rnd:.3f}", flush=True)


def evaluate(a):
    x = load_x(a.input)
    with h5py.File(a.embedding, "r") as f:
        emb = f["/embedding"][...]
    pres = preservation(input_knn(a.input, x), emb)
    print(f"sieve_tsne n={len(x)} {sampled_note(len(x))}knn10={pres:.4f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--out", required=True)
    g.add_argument("--n", type=int, default=50000)
    g.add_argument("--dims", type=int, default=50)
    g.add_argument("--clusters", type=int, default=10)
    g.add_argument("--center-scale", type=float, default=2.0)
    g.add_argument("--seed", type=int, default=1)
    t = sub.add_parser("tsne")
    t.add_argument("--input", required=True)
    t.add_argument("--subset", type=int, default=None)
    t.add_argument("--iterations", type=int, default=750)
    t.add_argument("--perplexity", type=float, default=30.0)
    t.add_argument("--seed", type=int, default=1)
    o = sub.add_parser("opentsne")
    o.add_argument("--input", required=True)
    o.add_argument("--subset", type=int, default=None)
    o.add_argument("--perplexity", type=float, default=30.0)
    o.add_argument("--seed", type=int, default=1)
    o.add_argument("--verbose", action="store_true", help="openTSNE's phase timings on stderr")
    c = sub.add_parser("pca")
    c.add_argument("--input", required=True)
    c.add_argument("--components", type=int, default=50)
    e = sub.add_parser("eval")
    e.add_argument("--input", required=True)
    e.add_argument("--embedding", required=True)
    a = p.parse_args()
    {"gen": gen, "tsne": tsne, "opentsne": opentsne, "pca": pca, "eval": evaluate}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
