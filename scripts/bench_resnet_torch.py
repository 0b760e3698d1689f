#!/usr/bin/env python3
"""PyTorch CPU peer of bench/bench_nn_resnet.cpp: the same CIFAR ResNet-18 (hand-written, no
torchvision), same batch, threads and step (pass train: zero_grad, forward, CE, backward, SGD
update; pass infer: forward in eval mode under torch.inference_mode, as extract_features).

    python scripts/bench_resnet_torch.py [batch=128] [steps=10] [warmup=2] [mode=fp32] [pass=train]

mode: fp32 (eager, NCHW), bf16 (torch.autocast("cpu", bfloat16) + channels_last: PyTorch's
best CPU mode on bf16 hardware), compile (torch.compile of the fp32 model) or compile-bf16.
Threads: torch.set_num_threads(OMP_NUM_THREADS, default 2). Prints median images/s.
Runs in the bench environment (scripts/install_deps.sh --bench: current PyTorch from PyPI).
"""
import contextlib
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x if self.downsample is None else self.downsample(x)
        return F.relu(out + short)


class ResNet18Cifar(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for i, planes in enumerate([64, 128, 256, 512]):
            blocks = []
            for b in range(2):
                stride = 2 if (i > 0 and b == 0) else 1
                blocks.append(BasicBlock(cin, planes, stride))
                cin = planes
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    mode = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    if mode not in ("fp32", "bf16", "compile", "compile-bf16"):
        sys.exit(f"bench_resnet_torch: mode '{mode}': expected fp32, bf16, compile or compile-bf16")
    which = sys.argv[5] if len(sys.argv) > 5 else "train"
    if which not in ("train", "infer"):
        sys.exit(f"bench_resnet_torch: pass '{which}': expected train or infer")
    bf16 = mode.endswith("bf16")
    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = ResNet18Cifar()
    model.train(which == "train")
    x = torch.randn(batch, 3, 32, 32)
    if bf16:  # channels_last lets oneDNN's bf16 kernels run without layout reorders
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    run = torch.compile(model) if mode.startswith("compile") else model
    y = torch.arange(batch) % 10
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    def train_step():
        opt.zero_grad()
        with autocast():
            loss = F.cross_entropy(run(x), y)
        loss.backward()
        opt.step()

    def infer_step():
        with torch.inference_mode(), autocast():
            run(x).float()

    step = train_step if which == "train" else infer_step
    times = []
    for s in range(warmup + steps):
        t = time.perf_counter()
        step()
        if s >= warmup:
            times.append(time.perf_counter() - t)
    times.sort()
    med = times[len(times) // 2]
    print(f"torch {torch.__version__} mode {mode} mkldnn={torch.backends.mkldnn.is_available()} "
          f"threads {torch.get_num_threads()} batch {batch} pass {which}")
    print(f"step median      {med:.3f} s over {steps} steps")
    print(f"RESULT torch_images_per_s {batch / med:.2f}")


if __name__ == "__main__":
    main()
