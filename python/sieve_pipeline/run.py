"""A Sieve run directory read from Python: Sieve's answer per training sample, by sample_id.

Every per-sample array this module returns is in the order of the dataset's training split
(``Run.sample_ids``), whatever order the derived file stored it in: files are joined by
``sample_id`` after their lineage is checked, as train_scaled and report do.
"""

import functools
import os

import numpy as np

from .lineage import (SCHEMA_DATASET, SCHEMA_DYNAMICS, SCHEMA_EMBEDDING, SCHEMA_FEATURES,
                      SCHEMA_FILTER, SieveFileError, attr_text, attr_texts, fingerprint_of,
                      open_checked)

# The files of a run directory by name (config/sections.hpp RunPaths).
FILES = {
    "dataset": "dataset.h5",
    "features": "features.h5",
    "embedding": "embedding.h5",
    "filter": "filter.h5",
    "dynamics": os.path.join("pretrain", "dynamics.h5"),
}
_SCHEMAS = {"features": SCHEMA_FEATURES, "embedding": SCHEMA_EMBEDDING,
            "filter": SCHEMA_FILTER, "dynamics": SCHEMA_DYNAMICS}
ARMS = ("full", "filtered", "random")


def _first_duplicate(sorted_ids):
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    return None if dup.size == 0 else int(sorted_ids[dup[0]])


class Run:
    """The files of one run directory, lineage-checked when opened.

    ``Run(path)`` reads ``dataset.h5`` and checks every derived file present
    (``features.h5``, ``embedding.h5``, ``filter.h5``, ``pretrain/dynamics.h5``) against it;
    a keyword (``filter="other/filter.h5"``) points one of them elsewhere, and then that file
    must exist. A derived file of another dataset raises LineageError naming both files.
    """

    def __init__(self, path=".", **files):
        unknown = set(files) - set(FILES)
        if unknown:
            raise TypeError(f"Run: unknown file name(s) {sorted(unknown)}; known: {sorted(FILES)}")
        self.dir = os.path.abspath(os.fspath(path))
        self.paths = {}
        for name, rel in FILES.items():
            given = files.get(name)
            p = os.path.abspath(os.fspath(given)) if given is not None else os.path.join(self.dir, rel)
            if given is not None and not os.path.exists(p):
                raise SieveFileError(f"{p}: no such file (given as {name}=)")
            if given is not None or os.path.exists(p) or name == "dataset":
                self.paths[name] = p
        with open_checked(self.paths["dataset"], SCHEMA_DATASET) as f:
            self.dataset_fingerprint = fingerprint_of(f)
            self.sample_ids = f["/train/sample_id"][()].astype(np.int64)
            self.labels = f["/train/labels"][()].astype(np.int64)
            self.noise_truth = (f["/train/noise_truth"][()].astype(bool)
                                if "/train/noise_truth" in f else None)
            self.clean_labels = (f["/train/clean_labels"][()].astype(np.int64)
                                 if "/train/clean_labels" in f else None)
            self.num_classes = int(f.attrs["num_classes"]) if "num_classes" in f.attrs else None
            self.class_names = attr_texts(f, "class_names")
            self.kind = attr_text(f, "kind", "image")
        self._order = np.argsort(self.sample_ids, kind="stable")
        dup = _first_duplicate(self.sample_ids[self._order])
        if dup is not None:
            raise SieveFileError(f"{self.paths['dataset']}: /train/sample_id {dup} appears more than once")
        # Lineage of every derived file now, so that a foreign file fails at Run(...).
        for name, schema in _SCHEMAS.items():
            if name in self.paths:
                open_checked(self.paths[name], schema, self.paths["dataset"],
                             self.dataset_fingerprint).close()

    def __repr__(self):
        have = ", ".join(n for n in FILES if n in self.paths)
        return f"Run({self.dir!r}: {len(self)} training samples; {have})"

    def __len__(self):
        return int(self.sample_ids.size)

    def has(self, name):
        """Whether the run has file ``name`` (a key of FILES)."""
        return name in self.paths

    def _open(self, name):
        if name not in self.paths:
            raise SieveFileError(f"{os.path.join(self.dir, FILES[name])}: no such file "
                                 f"(run the stage that writes it, or pass {name}=PATH)")
        return open_checked(self.paths[name], _SCHEMAS[name], self.paths["dataset"],
                            self.dataset_fingerprint)

    def rows_of(self, sample_ids, *, strict=True):
        """Positions in ``sample_ids`` order of the given ids (-1 for unknown ones unless
        ``strict``, which raises)."""
        ids = np.asarray(sample_ids, dtype=np.int64)
        sorted_ids = self.sample_ids[self._order]
        pos = np.minimum(np.searchsorted(sorted_ids, ids), max(len(self) - 1, 0))
        found = sorted_ids[pos] == ids if len(self) else np.zeros(ids.shape, bool)
        if strict and not np.all(found):
            bad = int(ids[~found][0])
            raise KeyError(f"sample_id {bad} is not in the training split of {self.paths['dataset']}")
        return np.where(found, self._order[pos], -1)

    def _align(self, name, ids, values, fill, complete=False):
        """``values`` (rows matching ``ids`` of file ``name``) in this run's sample order."""
        path = self.paths[name]
        ids = np.asarray(ids, dtype=np.int64)
        dup = _first_duplicate(np.sort(ids))
        if dup is not None:
            raise SieveFileError(f"{path}: /sample_id {dup} appears more than once")
        where = self.rows_of(ids, strict=False)
        known = where >= 0
        out = np.full((len(self),) + values.shape[1:], fill, dtype=values.dtype)
        out[where[known]] = values[known]
        if complete:
            have = np.zeros(len(self), bool)
            have[where[known]] = True
            if not np.all(have) or not np.all(known):
                raise SieveFileError(
                    f"{path}: {int(np.count_nonzero(~have))} training samples of "
                    f"{self.paths['dataset']} missing and {int(np.count_nonzero(~known))} "
                    f"unknown ones (made from another dataset?)")
        return out

    # ---- filter.h5: the keep masks and the detectors ----
    @functools.cached_property
    def _filter(self):
        with self._open("filter") as f:
            ids = f["/sample_id"][()]
            out = {"method": attr_text(f, "method")}
            for key in ("keep", "random_keep"):
                out[key] = self._align("filter", ids, f["/" + key][()].astype(bool), False, True)
            if "/labels" in f:
                flabels = self._align("filter", ids, f["/labels"][()].astype(np.int64), -1, True)
                bad = np.flatnonzero(flabels != self.labels)
                if bad.size:
                    i = bad[0]
                    raise SieveFileError(
                        f"{self.paths['filter']}: sample_id {self.sample_ids[i]} has label "
                        f"{flabels[i]} here but {self.labels[i]} in {self.paths['dataset']} "
                        f"(filter made from another dataset?)")
            out["detectors"] = {}
            if "/detectors" in f:
                for det, g in f["/detectors"].items():
                    score = self._align("filter", ids, g["score"][()].astype(np.float32), np.nan)
                    flag = self._align("filter", ids, g["flag"][()].astype(bool), False)
                    out["detectors"][det] = (score, flag)
            return out

    @property
    def keep(self):
        """bool [N]: the samples the filtered arm trains on (filter.h5 /keep)."""
        return self._filter["keep"]

    @property
    def random_keep(self):
        """bool [N]: the random arm's samples (as many per class as keep, chosen at random)."""
        return self._filter["random_keep"]

    @property
    def detector(self):
        """The detector whose flags made ``keep`` (filter.h5's ``method``)."""
        return self._filter["method"]

    @property
    def detectors(self):
        """Names of the detectors scored in filter.h5 (/detectors/<name>)."""
        return sorted(self._filter["detectors"])

    def score(self, detector=None):
        """float32 [N]: the detector's suspicion (higher = more suspicious); NaN where unscored."""
        return self._detector(detector)[0]

    def flag(self, detector=None):
        """bool [N]: the samples the detector flags."""
        return self._detector(detector)[1]

    def _detector(self, name):
        name = name or self.detector
        dets = self._filter["detectors"]
        if name not in dets:
            raise KeyError(f"{self.paths['filter']}: no /detectors/{name} "
                           f"(scored: {', '.join(sorted(dets)) or 'none'})")
        return dets[name]

    def mask(self, arm="filtered"):
        """bool [N]: the training samples of a train_scaled arm (full, filtered or random)."""
        if arm == "full":
            return np.ones(len(self), bool)
        if arm == "filtered":
            return self.keep
        if arm == "random":
            return self.random_keep
        raise ValueError(f"arm '{arm}': expected one of {', '.join(ARMS)}")

    def kept_ids(self, arm="filtered"):
        """The sample_ids an arm trains on, in dataset order."""
        return self.sample_ids[self.mask(arm)]

    # ---- features.h5: the extractor's class probabilities ----
    @functools.cached_property
    def probs(self):
        """float32 [N, classes]: the feature model's softmax (NaN rows where absent)."""
        with self._open("features") as f:
            if "/train/probs" not in f:
                raise SieveFileError(f"{self.paths['features']}: no /train/probs (an older Sieve)")
            return self._align("features", f["/train/sample_id"][()],
                               f["/train/probs"][()].astype(np.float32), np.nan)

    @property
    def suggested_labels(self):
        """int64 [N]: the feature model's most probable class (argmax of /train/probs); -1
        where the features file has no row, None without a features file."""
        if not self.has("features"):
            return None
        p = self.probs
        missing = np.isnan(p).any(axis=1)
        return np.where(missing, -1, np.argmax(np.nan_to_num(p, nan=-1.0), axis=1))

    # ---- embedding.h5 and pretrain/dynamics.h5 ----
    @functools.cached_property
    def embedding(self):
        """float32 [N, d]: the t-SNE embedding (NaN rows where absent)."""
        with self._open("embedding") as f:
            return self._align("embedding", f["/sample_id"][()],
                               f["/embedding"][()].astype(np.float32), np.nan)

    @functools.cached_property
    def margins(self):
        """float32 [epochs, N]: each sample's margin at each pretrain epoch (NaN where not
        recorded: before a resume). Held-out samples' margins come from the held-out evaluation
        at each epoch's end, not from training (see ``heldout``)."""
        with self._open("dynamics") as f:
            m = f["/margin"][()].astype(np.float32)
            return self._align("dynamics", f["/sample_id"][()], m.T, np.nan).T

    @functools.cached_property
    def heldout(self):
        """bool [N]: samples pretrain held out (their margins are from evaluation, on another
        scale than the trained samples': compare areas within each group, as cluster_filter
        does by quantile mapping). All False for files written before they were recorded."""
        with self._open("dynamics") as f:
            ids = f["/sample_id"][()]
            held = f["/heldout"][()].astype(bool) if "/heldout" in f else np.zeros(len(ids), bool)
            return self._align("dynamics", ids, held, False)

    @property
    def aum(self):
        """float32 [N]: the area under the margin (mean over recorded epochs; NaN if none).
        Held-out samples' areas are as recorded (see ``heldout``)."""
        m = self.margins
        n = np.sum(~np.isnan(m), axis=0)
        s = np.nansum(m, axis=0)
        return np.where(n > 0, s / np.maximum(n, 1), np.nan).astype(np.float32)

    # ---- everything by sample_id ----
    def table(self):
        """dict of equal-length columns, one row per training sample (dataset order):
        sample_id, label, suggested_label, keep, random_keep, <detector>_score/_flag,
        noise_truth and clean_label where the dataset has them, aum with dynamics.
        ``pandas.DataFrame(run.table())`` gives a data frame."""
        t = {"sample_id": self.sample_ids, "label": self.labels}
        if self.has("features"):
            t["suggested_label"] = self.suggested_labels
        if self.has("filter"):
            t["keep"] = self.keep
            t["random_keep"] = self.random_keep
            for d in self.detectors:
                t[f"{d}_score"] = self.score(d)
                t[f"{d}_flag"] = self.flag(d)
        if self.noise_truth is not None:
            t["noise_truth"] = self.noise_truth
        if self.clean_labels is not None:
            t["clean_label"] = self.clean_labels
        if self.has("dynamics"):
            t["aum"] = self.aum
        return t

    def sample(self, sample_id):
        """One sample's row of ``table()`` as a dict of Python scalars."""
        row = int(self.rows_of([sample_id])[0])
        return {k: v[row].item() for k, v in self.table().items()}
