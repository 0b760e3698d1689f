"""KeepMaskSampler: Sieve's keep mask applied to a dataset of your own, by index.

Pure Python over numpy: a DataLoader takes any iterable of indices with a length as its
``sampler``, so this needs no torch (and tests without torch check its indices).
"""

import os
import sys

import numpy as np

from .run import Run


def _distributed_defaults():
    """(num_replicas, rank) of an initialised torch.distributed group, else (1, 0). torch is
    looked at only if the program imported it already: no process group exists otherwise."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class KeepMaskSampler:
    """The indices of your dataset whose samples an arm of a Sieve run keeps.

    ``source``: a Run, a run directory, or the kept sample ids themselves.
    ``sample_ids``: the Sieve sample_id of each index of your dataset, in index order (None:
    index i is sample_id i, as for a dataset Sieve read in the same order). ``missing``
    counts the kept ids that ``sample_ids`` lacks (kept samples your dataset does not have).
    Sharding as torch's DistributedSampler: each of ``num_replicas`` ranks takes every
    ``num_replicas``-th index from ``rank`` on; with ``drop_last=False`` the list is padded
    by repeating its start so that every rank gets as many (DDP needs equal step counts),
    with ``drop_last=True`` the tail is dropped instead. ``shuffle`` permutes the indices
    with ``seed + epoch`` (``set_epoch``), the same permutation on every rank.
    """

    def __init__(self, source, arm="filtered", sample_ids=None, *, shuffle=False, seed=0,
                 num_replicas=None, rank=None, drop_last=False):
        if isinstance(source, Run):
            kept = source.kept_ids(arm)
        elif isinstance(source, (str, os.PathLike)):
            kept = Run(source).kept_ids(arm)
        else:
            kept = np.asarray(source, dtype=np.int64).ravel()
        kept = np.unique(kept)
        if sample_ids is None:
            if kept.size and kept[0] < 0:
                raise ValueError(f"sample_id {int(kept[0])} cannot be an index: pass sample_ids=")
            self.indices = kept
            self.missing = 0
        else:
            ids = np.asarray(sample_ids, dtype=np.int64).ravel()
            self.indices = np.flatnonzero(np.isin(ids, kept))
            self.missing = int(kept.size - np.count_nonzero(np.isin(kept, ids)))
        if num_replicas is None or rank is None:
            n, r = _distributed_defaults()
            num_replicas = n if num_replicas is None else num_replicas
            rank = r if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} outside 0..{num_replicas - 1}")
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        total = self.indices.size
        if self.drop_last:
            self.num_samples = total // self.num_replicas
        else:
            self.num_samples = -(-total // self.num_replicas)

    def set_epoch(self, epoch):
        """Another permutation per epoch (when shuffling), as DistributedSampler.set_epoch."""
        self.epoch = int(epoch)

    def rank_indices(self):
        """This rank's indices for the current epoch, as a numpy array."""
        idx = self.indices
        if self.shuffle:
            idx = idx[np.random.default_rng(self.seed + self.epoch).permutation(idx.size)]
        total = self.num_samples * self.num_replicas
        if total > idx.size and idx.size:
            idx = np.concatenate([idx, np.resize(idx, total - idx.size)])
        return idx[:total][self.rank::self.num_replicas]

    def __iter__(self):
        return iter(self.rank_indices().tolist())

    def __len__(self):
        return self.num_samples
