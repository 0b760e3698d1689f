"""Lineage between a run's files: the checks Sieve's C++ readers make (libcore/io/lineage.hpp).

A dataset file carries ``fingerprint`` (a content hash of every row); every file derived
from it (features, embedding, filter, dynamics, models) carries ``dataset_fingerprint``.
Files are joined by ``sample_id`` only when the two agree, so that a filter made from one
dataset is never applied to another with the same ids (docs/formats.md, "Lineage").
"""

import h5py
import numpy as np

SCHEMA_DATASET = "sieve.dataset/1"
SCHEMA_FEATURES = "sieve.features/1"
SCHEMA_EMBEDDING = "sieve.embedding/1"
SCHEMA_FILTER = "sieve.filter/1"
SCHEMA_DYNAMICS = "sieve.dynamics/1"


class SieveFileError(ValueError):
    """A run file that is missing, of another schema, or inconsistent in itself."""


class LineageError(SieveFileError):
    """Two files that do not come from the same dataset (the message names both)."""


def attr_text(f, name, default=""):
    """A root attribute as str (h5py gives bytes or str depending on how it was written)."""
    if name not in f.attrs:
        return default
    v = f.attrs[name]
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8", "replace")
    return str(v)


def attr_texts(f, name):
    """A root attribute holding a list of strings (e.g. ``inputs``, ``class_names``)."""
    if name not in f.attrs:
        return []
    v = np.atleast_1d(f.attrs[name])
    return [x.decode("utf-8", "replace") if isinstance(x, (bytes, np.bytes_)) else str(x)
            for x in v]


def require_schema(f, path, schema):
    got = attr_text(f, "schema")
    if got != schema:
        raise SieveFileError(f"{path}: schema '{got or 'none'}', expected '{schema}' "
                             f"(is this the right file?)")


def fingerprint_of(f):
    """The file's own ``fingerprint`` ("" when it has none)."""
    return attr_text(f, "fingerprint")


def dataset_fingerprint_of(f):
    """The dataset a file belongs to: a derived file's ``dataset_fingerprint``, a dataset's
    own ``fingerprint`` ("" when it has neither), as lineage::dataset_fingerprint_of."""
    if "dataset_fingerprint" in f.attrs:
        return attr_text(f, "dataset_fingerprint")
    if attr_text(f, "schema") == SCHEMA_DATASET:
        return fingerprint_of(f)
    return ""


def require_same_dataset(derived_path, derived_fp, dataset_path, dataset_fp):
    """Raises LineageError naming both files when ``derived_fp`` (recorded in
    ``derived_path``) is not ``dataset_fp`` (of ``dataset_path``). As in the C++ readers: a
    dataset without a fingerprint (made by hand) is not checked, and a derived file without
    one next to a dataset that has one is refused."""
    if not dataset_fp:
        return
    if not derived_fp:
        raise LineageError(
            f"{derived_path}: no 'dataset_fingerprint' attribute, so it cannot be matched to "
            f"{dataset_path} (written by an older Sieve or by hand); re-run the stage that made it")
    if derived_fp != dataset_fp:
        raise LineageError(
            f"{derived_path}: made from another dataset (dataset_fingerprint {derived_fp}) than "
            f"{dataset_path} (fingerprint {dataset_fp}); re-run the stages after shard_dataset, "
            f"or point at the matching files")


def open_checked(path, schema, dataset_path=None, dataset_fp=""):
    """Opens ``path`` read-only, checks its schema and, given the dataset, its lineage."""
    try:
        f = h5py.File(path, "r")
    except (OSError, FileNotFoundError) as e:
        raise SieveFileError(f"{path}: cannot open ({e})") from None
    try:
        require_schema(f, path, schema)
        if dataset_path is not None:
            require_same_dataset(path, dataset_fingerprint_of(f), dataset_path, dataset_fp)
    except Exception:
        f.close()
        raise
    return f
