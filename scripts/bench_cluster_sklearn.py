#!/usr/bin/python3
"""A peer's DBSCAN on the raw float32 [N,2] points written by bench_cluster_dbscan:
scikit-learn's, or with IMPL=dbscan the `dbscan` package (Wang, Gu & Shun, SIGMOD 2020:
parallel exact DBSCAN) from the bench virtual environment.

Usage: bench_cluster_sklearn.py FILE EPS MIN_SAMPLES [N_JOBS [IMPL]]
Prints one line: "wall_s cpu_s clusters noise" (cpu_s: process CPU time, all threads), or "out-of-memory" when the allocation fails
(the caller runs it under a memory limit). Run with Debian's /usr/bin/python3
(python3-sklearn, python3-numpy).
"""
import sys
import time

import numpy as np


def main():
    path, eps, min_samples = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    n_jobs = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    x = np.fromfile(path, dtype=np.float32).reshape(-1, 2)
    impl = sys.argv[5] if len(sys.argv) > 5 else "sklearn"
    try:
        if impl == "dbscan":
            from dbscan import DBSCAN as ParallelDBSCAN
            x64 = x.astype(np.float64)  # its input type; the conversion is not timed
            t0, c0 = time.perf_counter(), time.process_time()
            labels, _ = ParallelDBSCAN(x64, eps=eps, min_samples=min_samples)
        else:
            from sklearn.cluster import DBSCAN
            t0, c0 = time.perf_counter(), time.process_time()
            labels = DBSCAN(eps=eps, min_samples=min_samples, n_jobs=n_jobs).fit(x).labels_
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    except MemoryError:
        print("out-of-memory")
        return
    clusters = int(labels.max()) + 1 if labels.size else 0
    print(f"{wall:.4f} {cpu:.4f} {clusters} {int((labels < 0).sum())}")


if __name__ == "__main__":
    main()
