#!/usr/bin/env python3
"""Peer for scripts/bench_folder.sh, and the folder it converts.

  bench_folder_pillow.py make DIR N [W H]   write N JPEGs (quality 90, W x H, default
                                            500x375 as an average ImageNet photo) into
                                            DIR/class-<k>/ for 10 classes
  bench_folder_pillow.py convert DIR OUT.npy SIZE RESIZE PROCS
                                            the plain Pillow conversion a user would write:
                                            open, convert("RGB"), resize the shorter side
                                            to RESIZE (bilinear, antialiased), centre crop
                                            SIZE, into one uint8 [N,SIZE,SIZE,3] .npy,
                                            with PROCS worker processes. Prints one JSON line.
"""
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np
from PIL import Image


def make(d, n, w=500, h=375):
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for i in range(n):
        k = i % 10
        os.makedirs(os.path.join(d, f"class-{k}"), exist_ok=True)
        # smooth colour fields plus noise: JPEG sizes like photos (~60-90 KB)
        base = np.stack([np.sin(xx / (17 + k + c) + i) * np.cos(yy / (23 + c)) for c in range(3)], -1)
        img = (127 + 90 * base + rng.normal(0, 18, (h, w, 3))).clip(0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, f"class-{k}", f"{i:06d}.jpg"), quality=90)


def files(d):
    out = []
    for c in sorted(os.listdir(d)):
        for f in sorted(os.listdir(os.path.join(d, c))):
            out.append(os.path.join(d, c, f))
    return out


def one(args):
    path, size, resize = args
    im = Image.open(path).convert("RGB")
    w, h = im.size
    if w <= h:
        nw, nh = resize, int(resize * h / w)
    else:
        nw, nh = int(resize * w / h), resize
    im = im.resize((nw, nh), Image.BILINEAR)
    left, top = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    return np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8)


def convert(d, out, size, resize, procs):
    fl = files(d)
    t0 = time.time()
    arr = np.lib.format.open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(fl), size, size, 3))
    with Pool(procs) as pool:
        for i, a in enumerate(pool.imap(one, [(f, size, resize) for f in fl], chunksize=16)):
            arr[i] = a
    arr.flush()
    del arr
    fd = os.open(out, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    dt = time.time() - t0
    print(json.dumps({"images": len(fl), "seconds": dt, "images_per_s": len(fl) / dt}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), *(int(v) for v in sys.argv[4:6]))
    else:
        convert(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
