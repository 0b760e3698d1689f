"""A few training steps of a small PyTorch model on the filtered arm of a Sieve run through
sieve_pipeline (tests/pipeline/python_torch.sh). Usage: check_python_torch.py RUN_DIR"""
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import sieve_pipeline as sp

run = sp.Run(sys.argv[1])
kept = set(run.kept_ids("filtered").tolist())
torch.manual_seed(0)


def check(cond, msg):
    if not cond:
        sys.exit(f"check_python_torch: FAIL: {msg}")


ds = sp.SieveDataset(run, arm="filtered", return_sample_id=True)
check(len(ds) == len(kept), f"filtered arm has {len(ds)} samples, the keep mask {len(kept)}")
check(len(sp.SieveDataset(run, arm="random")) == int(run.random_keep.sum()), "random arm size")
check(len(sp.SieveDataset(run, arm="full")) == len(run), "full arm size")
check(len(sp.SieveDataset(run, split="test")) > 0, "test split empty")

# Rank 1 of 2 with 2 workers: each worker opens dataset.h5 itself; the rank reads only its
# DistributedSampler part, and every sample it sees is a kept one.
seen = set()
sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=0)
loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=2)
for x, y, sid in loader:
    seen.update(sid.tolist())
check(seen <= kept, f"{len(seen - kept)} samples outside the keep mask")
check(len(seen) == len(kept) // 2 or len(seen) == (len(kept) + 1) // 2,
      f"rank 1 saw {len(seen)} of {len(kept)} samples")

# Training: a small CNN overfits one batch of the filtered arm (the images and labels it
# reads agree), then runs a few steps over the loader.
c = x.shape[1]
model = torch.nn.Sequential(
    torch.nn.Conv2d(c, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
    torch.nn.Flatten(), torch.nn.Linear(8 * 16, run.num_classes))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
xb, yb, _ = next(iter(DataLoader(ds, batch_size=32, shuffle=True)))
losses = []
for _ in range(60):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    losses.append(loss.item())
check(np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0],
      f"the loss on one batch did not fall by half: {losses[0]:.3f} -> {losses[-1]:.3f}")
steps = 0
for x, y, _ in DataLoader(ds, batch_size=32, shuffle=True, num_workers=2):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    steps += 1
check(steps == -(-len(ds) // 32) and np.isfinite(loss.item()), f"{steps} steps, loss {loss.item()}")

# KeepMaskSampler on a user's own dataset (a TensorDataset whose row i is sample_id i).
ids = torch.arange(int(run.sample_ids.max()) + 1)
got = [int(i) for (b,) in DataLoader(TensorDataset(ids), batch_size=64,
                                     sampler=sp.KeepMaskSampler(run)) for i in b]
check(got == sorted(kept), "KeepMaskSampler through a DataLoader yields other indices")
print(f"check_python_torch: OK (one-batch loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
      f"{steps} steps over {len(ds)} filtered samples)")
