#!/usr/bin/python3
"""PyTorch DDP (gloo, CPU) peer of scripts/bench_dataparallel.sh: CIFAR ResNet-18 (the model of
bench_resnet_torch.py), global batch split over `ranks` processes, fwd + CE + bwd (DDP bucketed
all-reduce) + SGD, random data (no loader).

    /usr/bin/python3 scripts/bench_dataparallel_torch.py ranks global_batch steps threads width

Prints 'RESULT torch_ddp <images/s global>' (median over steps after 1 warm-up).
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_resnet_torch import ResNet18Cifar  # noqa: E402


def worker(rank, ranks, batch, steps, threads, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(ResNet18Cifar())
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    per = batch // ranks
    x = torch.randn(per, 3, 32, 32)
    y = torch.arange(per) % 10
    times = []
    for s in range(steps + 1):
        dist.barrier()
        t = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        dist.barrier()
        if s > 0:
            times.append(time.perf_counter() - t)
    if rank == 0:
        q.put(batch / statistics.median(times))
    dist.destroy_process_group()


def main():
    ranks, batch, steps, threads = (int(a) for a in sys.argv[1:5])
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, ranks, batch, steps, threads, q))
             for r in range(ranks)]
    for p in procs:
        p.start()
    ips = q.get()
    for p in procs:
        p.join()
    print(f"RESULT torch_ddp {ips:.1f}")


if __name__ == "__main__":
    main()
