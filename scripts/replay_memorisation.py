#!/usr/bin/env python3
"""Replay pretrain's memorisation test on finished runs' per-epoch metrics.

  scripts/replay_memorisation.py DIR [DIR ...]

Finds every pretrain/metrics.jsonl (and metrics_first_pass.jsonl, auto's cross-entropy run)
under each DIR, takes the held-out size from the model_early.json beside it, replays the
one-standard-error guard (train/crossfit.hpp: replaces_early_model, pretrain.early_margin_se
1) to find the epoch where the held-out accuracy last rose measurably, and prints both parts
of `memorised`, in units of the held-out error (1 - peak):
  outran  = (last train acc - held-out peak) / error      (fires above 0.5)
  after   = (last train acc - train acc at that epoch) / error   (fires above 0.4)
so that a change to the test can be checked against every curve on disk before anything is
trained again (docs/detection.md, seventeenth session).
"""
import json
import math
import os
import sys


def replay(metrics_path, holdout_samples, margin_se=1.0):
    rows = []
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if "holdout_acc" in r and "train_acc" in r:
                rows.append(r)
    if not rows:
        return None
    kept, stall = -1.0, 0
    for i, r in enumerate(rows):
        se = math.sqrt(kept * (1 - kept) / holdout_samples) if kept >= 0 else 0.0
        if kept < 0 or r["holdout_acc"] > kept + margin_se * se:
            kept, stall = r["holdout_acc"], i
    peak = max(r["holdout_acc"] for r in rows)
    last = rows[-1]["train_acc"]
    error = 1 - peak
    if error <= 0:
        return dict(epochs=len(rows), stall=stall + 1, peak=peak, outran=math.inf,
                    after=math.inf, memorised=True)
    outran = (last - peak) / error
    after = (last - rows[stall]["train_acc"]) / error
    return dict(epochs=len(rows), stall=stall + 1, peak=peak, outran=outran, after=after,
                memorised=outran > 0.5 and after > 0.4)


def main(dirs):
    if not dirs:
        sys.exit(__doc__)
    print("%-60s %6s %6s %6s %7s %7s %s" % ("metrics", "epochs", "stall", "peak", "outran",
                                            "after", "memorised"))
    for top in dirs:
        for root, _, files in sorted(os.walk(top)):
            info = os.path.join(root, "model_early.json")
            if not os.path.exists(info):
                continue
            with open(info) as f:
                lines = [l for l in f if l.strip()]
            samples = json.loads(lines[-1]).get("holdout_samples", 0) if lines else 0
            for name in ("metrics.jsonl", "metrics_first_pass.jsonl"):
                path = os.path.join(root, name)
                if samples <= 0 or not os.path.exists(path):
                    continue
                r = replay(path, samples)
                if r:
                    print("%-60s %6d %6d %6.3f %7.2f %7.2f %s" % (
                        path[-60:], r["epochs"], r["stall"], r["peak"], r["outran"], r["after"],
                        "yes" if r["memorised"] else "no"))


if __name__ == "__main__":
    main(sys.argv[1:])
