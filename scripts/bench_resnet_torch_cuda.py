#!/usr/bin/env python3
"""PyTorch GPU peer of `bench_nn_resnet ... cuda`: the same ResNet (torchvision layout, v1.5
bottlenecks; CIFAR stem = 3x3 conv stride 1 and no max pool, as scripts/bench_resnet_torch.py
builds it), batch, and step: zero_grad, forward, cross-entropy, backward, plain SGD (lr 0.01).

    python3 scripts/bench_resnet_torch_cuda.py [batch=512] [steps=30] [warmup=5]
        [precision=bf16|fp32] [mode=eager|compile] [arch=resnet18|resnet50] [stem=cifar|imagenet]
        [input=32]

As PyTorch is usually run fast: channels_last, cudnn.benchmark, bf16 through autocast (fp32
master weights, as Sieve's bf16), fp32 with TF32 off (Sieve's fp32 default), torch.compile
for mode=compile. Like Sieve's bench, every step uploads the batch from (pageable) host
memory and ends synchronised. No network needed. Prints the median images/s.
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = shortcut(cin, planes, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.downsample = shortcut(cin, planes * 4, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def shortcut(cin, cout, stride):
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


ARCHS = {"resnet18": (BasicBlock, [2, 2, 2, 2]), "resnet50": (Bottleneck, [3, 4, 6, 3])}


class ResNet(nn.Module):
    def __init__(self, arch, stem, num_classes):
        super().__init__()
        block, counts = ARCHS[arch]
        if stem == "cifar":
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.bn1 = nn.BatchNorm2d(64)
        stages, cin = [], 64
        for i, (planes, count) in enumerate(zip([64, 128, 256, 512], counts)):
            blocks = []
            for b in range(count):
                blocks.append(block(cin, planes, 2 if (i > 0 and b == 0) else 1))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    args = sys.argv[1:]
    batch = int(args[0]) if len(args) > 0 else 512
    steps = int(args[1]) if len(args) > 1 else 30
    warmup = int(args[2]) if len(args) > 2 else 5
    precision = args[3] if len(args) > 3 else "bf16"
    mode = args[4] if len(args) > 4 else "eager"
    arch = args[5] if len(args) > 5 else "resnet18"
    stem = args[6] if len(args) > 6 else "cifar"
    size = int(args[7]) if len(args) > 7 else 32
    if precision not in ("bf16", "fp32") or mode not in ("eager", "compile"):
        sys.exit(f"bench_resnet_torch_cuda: precision bf16|fp32, mode eager|compile; got {args}")
    if not torch.cuda.is_available():
        sys.exit("bench_resnet_torch_cuda: no CUDA device visible to PyTorch")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(1)
    classes = 1000 if stem == "imagenet" else 10
    dev = torch.device("cuda")
    model = ResNet(arch, stem, classes).to(dev, memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    forward = torch.compile(model) if mode == "compile" else model
    x_host = torch.randn(batch, 3, size, size)
    y = (torch.arange(batch) % classes).to(dev)

    def step():
        x = x_host.to(dev).contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    times = []
    for s in range(warmup + steps):  # the first steps compile / benchmark cuDNN algorithms
        t = time.perf_counter()
        step()
        if s >= warmup:
            times.append(time.perf_counter() - t)
    times.sort()
    med = times[len(times) // 2]
    print(f"torch {torch.__version__} {torch.cuda.get_device_name()} {arch} {stem} {size}x{size} "
          f"batch {batch} {precision} {mode}")
    print(f"step median      {med:.4f} s over {steps} steps")
    print(f"RESULT torch_images_per_s {batch / med:.2f}")


if __name__ == "__main__":
    main()
