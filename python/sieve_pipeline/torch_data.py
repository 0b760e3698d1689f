"""SieveDataset: a PyTorch Dataset over dataset.h5 for one arm of a run (needs torch).

Imported only when ``sieve_pipeline.SieveDataset`` is first used, so that the rest of the
package works without torch.
"""

import os

import numpy as np
import torch
from torch.utils.data import Dataset

from .rows import DatasetRows
from .run import Run


class SieveDataset(Dataset):
    """The training samples of one arm (``full``, ``filtered`` or ``random``) of a run, or
    its test split (``split="test"``, arm full), read lazily from dataset.h5.

    ``run``: a Run or a run directory. Items are ``(x, label)``, or ``(x, label,
    sample_id)`` with ``return_sample_id=True``: x a float32 tensor (CHW for images,
    normalised by the dataset's mean/std; see DatasetRows), label an int (the given label).
    ``transform`` / ``target_transform`` are applied to x / label. Works with
    DistributedSampler and DataLoader workers: each process opens dataset.h5 itself and
    reads only its rows; a batched fetch (``__getitems__``, torch 2.x) reads a whole
    batch in one HDF5 call.
    """

    def __init__(self, run, arm="full", split="train", *, transform=None,
                 target_transform=None, return_sample_id=False, normalize=True):
        run = run if isinstance(run, Run) else Run(os.fspath(run))
        if split == "test" and arm != "full":
            raise ValueError(f"arm '{arm}' selects training samples; the test split has arm full only")
        rows = np.flatnonzero(run.mask(arm)) if split == "train" else None
        self.arm, self.split = arm, split
        self.rows = DatasetRows(run.paths["dataset"], split, rows, normalize)
        self.num_classes = self.rows.num_classes
        self.transform, self.target_transform = transform, target_transform
        self.return_sample_id = return_sample_id

    def __len__(self):
        return len(self.rows)

    def _item(self, x, y, sid):
        x = torch.from_numpy(np.ascontiguousarray(x))
        if self.transform is not None:
            x = self.transform(x)
        y = int(y)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return (x, y, int(sid)) if self.return_sample_id else (x, y)

    def __getitem__(self, i):
        x, y, sid = self.rows.read([i])
        return self._item(x[0], y[0], sid[0])

    def __getitems__(self, indices):
        x, y, sid = self.rows.read(indices)
        return [self._item(x[k], y[k], sid[k]) for k in range(len(indices))]
