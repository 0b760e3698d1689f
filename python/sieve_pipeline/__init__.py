"""sieve_pipeline: a Sieve run directory from Python (docs/python.md).

    from sieve_pipeline import Run, KeepMaskSampler
    run = Run("runs/quickstart")          # lineage-checked, as Sieve's own readers
    run.keep, run.score("knn"), run.suggested_labels, run.table()
    sampler = KeepMaskSampler(run, "filtered", shuffle=True)   # for your own dataset
    from sieve_pipeline import SieveDataset                   # needs torch
    ds = SieveDataset(run, arm="filtered")

Importing this package needs only h5py and numpy: SieveDataset (torch) loads on first use.
"""

from .lineage import LineageError, SieveFileError, dataset_fingerprint_of, fingerprint_of
from .rows import DatasetRows
from .run import ARMS, FILES, Run
from .sampler import KeepMaskSampler

__version__ = "0.1.0"
__all__ = ["ARMS", "FILES", "DatasetRows", "KeepMaskSampler", "LineageError", "Run",
           "SieveDataset", "SieveFileError", "dataset_fingerprint_of", "fingerprint_of"]


def __getattr__(name):
    # PEP 562: the torch part is imported when it is first asked for, not with the package.
    if name == "SieveDataset":
        from .torch_data import SieveDataset
        return SieveDataset
    raise AttributeError(f"module 'sieve_pipeline' has no attribute '{name}'")
