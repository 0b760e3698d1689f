#!/usr/bin/env python3
"""Summarise Sieve step timelines (pretrain/train_scaled --trace FILE) as CSV.

Per trace: where a step's time goes on the main thread, in ms per step, averaged over the
steps after the first (warm-up) and over the ranks. Each span counts its exclusive time
(its duration minus the spans nested inside it on the same lane), so nothing is counted
twice: the optimizer span of the parameter server contains its "wait for pulls", which is
exposed communication, not optimizer work.

  compute          forward/backward (their per-unit "layer" spans included)
  exposed_comm     blocked on communication: "wait" spans (bucket/push/pull waits, the BN
                   broadcast, the per-step statistics allreduce) and fusion-queue agreement
  negotiate        of which fusion-queue agreement rounds (incl. cycle pacing)
  data             waiting for the next batch
  optimizer        the SGD update
  other            the rest of the step (loss, bookkeeping)

The report computes the same split in C++ (libcore/report/timeline.cpp).
usage: trace_summary.py TRACE.json...
"""
import json
import sys
from collections import defaultdict

PARTS = ["compute", "exposed_comm", "negotiate", "data", "optimizer", "other"]


def main_lane_by_rank(events):
    """{pid: [complete events on the main lane]}, sorted by start, parents before children."""
    per_pid = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("tid", 0) == 0:
            per_pid[e["pid"]].append(e)
    for evs in per_pid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
    return per_pid


def summarise(path):
    with open(path) as f:
        trace = json.load(f)
    meta = trace.get("otherData", {})
    per_rank = []
    for evs_sorted in main_lane_by_rank(trace["traceEvents"]).values():
        # Exclusive times: a stack walk subtracts each span from its parent.
        stack, excl = [], {}
        for i, e in enumerate(evs_sorted):
            while stack and evs_sorted[stack[-1]]["ts"] + evs_sorted[stack[-1]]["dur"] <= e["ts"] + 1e-3:
                stack.pop()
            excl[i] = e["dur"]
            if stack:
                excl[stack[-1]] -= e["dur"]
            stack.append(i)
        step_rows = []
        for i, e in enumerate(evs_sorted):
            if e["cat"] != "step":
                continue
            row = dict.fromkeys(PARTS, 0.0)
            row["step"] = e["dur"]
            row["other"] = excl[i]
            step_rows.append((e["ts"], e["ts"] + e["dur"], row))
        for i, e in enumerate(evs_sorted):
            cat = e["cat"]
            if cat == "step":
                continue
            part = {"compute": "compute", "layer": "compute", "wait": "exposed_comm",
                    "negotiate": "exposed_comm", "data": "data", "optimizer": "optimizer"}.get(cat)
            if part is None:
                continue
            for t0, t1, row in step_rows:
                if t0 - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 1e-3:
                    row[part] += excl[i]
                    if cat == "negotiate":
                        row["negotiate"] += excl[i]
                    break
        rows = [r for _, _, r in step_rows][1:] or [r for _, _, r in step_rows]
        if rows:
            per_rank.append({k: sum(r[k] for r in rows) / len(rows) for k in PARTS + ["step"]})
    n = len(per_rank)
    mean = {k: sum(r[k] for r in per_rank) / n / 1000.0 for k in PARTS + ["step"]}
    return meta, n, mean


def main(paths):
    print("strategy,ranks,step_ms," + ",".join(p + "_ms" for p in PARTS))
    for p in sorted(paths):
        meta, n, m = summarise(p)
        print(",".join([meta.get("strategy", "?"), str(meta.get("ranks", n)), "%.2f" % m["step"]] +
                       ["%.2f" % m[k] for k in PARTS]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
