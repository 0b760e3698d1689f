"""Rows of dataset.h5 read lazily, one process at a time: the part of the PyTorch Dataset
that needs no torch.

The HDF5 file is opened on first use in each process and never pickled, so a DataLoader's
workers (fork or spawn) and the ranks of a DistributedSampler each open their own handle and
read only the rows they are given. A sharded dataset (data.shards > 1) is read through its
index file, whose datasets are HDF5 virtual datasets over the shard files (docs/formats.md):
h5py follows them, so each read touches only the shards that hold its rows.
"""

import os

import h5py
import numpy as np

from .lineage import SCHEMA_DATASET, open_checked


class DatasetRows:
    """Selected rows of one split of dataset.h5, as (x, label, sample_id) numpy values.

    ``rows``: positions in the split (None: all). Images come as float32 CHW scaled to 0..1
    and normalised with the dataset's per-channel ``mean``/``std`` (as Sieve's trainers do;
    ``normalize=False`` gives 0..1); tabular rows as float32 features, normalised the same way.
    """

    def __init__(self, dataset_path, split="train", rows=None, normalize=True):
        if split not in ("train", "test"):
            raise ValueError(f"split '{split}': expected train or test")
        self.path = os.path.abspath(os.fspath(dataset_path))
        self.split = split
        with open_checked(self.path, SCHEMA_DATASET) as f:
            self.image = f"/{split}/images" in f
            data = f"/{split}/images" if self.image else f"/{split}/features"
            if data not in f:
                raise ValueError(f"{self.path}: no /{split}/images or /{split}/features")
            self._data = data
            n = f[data].shape[0]
            self.shape = tuple(f[data].shape[1:])
            self.num_classes = int(f.attrs["num_classes"]) if "num_classes" in f.attrs else None
            c = self.shape[-1] if self.image else self.shape[0]
            mean = np.asarray(f.attrs.get("mean", np.zeros(c)), np.float32)
            std = np.asarray(f.attrs.get("std", np.ones(c)), np.float32)
        self.rows = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
        if self.rows.size and (self.rows.min() < 0 or self.rows.max() >= n):
            raise IndexError(f"{self.path}: rows outside 0..{n - 1} of /{split}")
        if not normalize:
            mean, std = np.zeros_like(mean), np.ones_like(std)
        std = np.where(std > 0, std, 1.0).astype(np.float32)
        self._mean = mean.reshape(-1, 1, 1) if self.image else mean
        self._std = std.reshape(-1, 1, 1) if self.image else std
        self._file = None
        self._pid = None

    def __len__(self):
        return int(self.rows.size)

    def __getstate__(self):
        # A worker or another rank opens its own handle; an h5py handle does not pickle.
        state = dict(self.__dict__)
        state["_file"] = None
        state["_pid"] = None
        return state

    def _f(self):
        if self._file is None or self._pid != os.getpid():
            self._file = h5py.File(self.path, "r")
            self._pid = os.getpid()
        return self._file

    def close(self):
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None

    def _convert(self, raw):
        if self.image:
            x = np.moveaxis(raw, -1, -3).astype(np.float32) / 255.0  # NHWC -> NCHW
        else:
            x = raw.astype(np.float32)
        return (x - self._mean) / self._std

    def read(self, indices):
        """Items ``indices`` (positions in this selection): x [n, ...], labels, sample_ids.
        One HDF5 read per dataset for the whole batch (h5py needs increasing rows)."""
        want = self.rows[np.asarray(indices, np.int64)]
        uniq, inverse = np.unique(want, return_inverse=True)
        f = self._f()
        split = f[self.split]
        x = self._convert(f[self._data][uniq])[inverse]
        labels = split["labels"][uniq].astype(np.int64)[inverse]
        ids = split["sample_id"][uniq].astype(np.int64)[inverse]
        return x, labels, ids

    def __getitem__(self, i):
        x, y, sid = self.read([i])
        return x[0], int(y[0]), int(sid[0])
