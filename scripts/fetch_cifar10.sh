#!/usr/bin/env bash
# Download the CIFAR-10 binary version from the CIFAR site, verify its md5, extract it and
# print the shard_dataset command that converts it.
#
#   scripts/fetch_cifar10.sh [DEST_DIR]        (default: data)
#
# Result: DEST_DIR/cifar-10-batches-bin/{data_batch_1..5.bin,test_batch.bin,batches.meta.txt}.
# A tarball already in DEST_DIR with the right md5 is reused (no download).
set -euo pipefail

URL="https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
MD5="c32a1d4ab5d03f1284b67883e8d87530"
DEST="${1:-data}"
case "$DEST" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac

die() { echo "fetch_cifar10: error: $*" >&2; exit 1; }
command -v md5sum >/dev/null || die "md5sum not found (coreutils)"
command -v tar >/dev/null || die "tar not found"

mkdir -p "$DEST" || die "cannot create $DEST"
tarball="$DEST/cifar-10-binary.tar.gz"

md5_ok() { [ -f "$1" ] && [ "$(md5sum "$1" | cut -d' ' -f1)" = "$MD5" ]; }

if md5_ok "$tarball"; then
  echo "fetch_cifar10: $tarball already present (md5 ok)"
else
  echo "fetch_cifar10: downloading $URL"
  part="$tarball.part"
  rm -f "$part"
  if command -v curl >/dev/null; then
    curl -fL --retry 3 --connect-timeout 30 -o "$part" "$URL" || { rm -f "$part"; die "download failed: $URL"; }
  elif command -v wget >/dev/null; then
    wget -q --tries=3 -O "$part" "$URL" || { rm -f "$part"; die "download failed: $URL"; }
  else
    die "neither curl nor wget is installed"
  fi
  got="$(md5sum "$part" | cut -d' ' -f1)"
  if [ "$got" != "$MD5" ]; then
    rm -f "$part"
    die "md5 mismatch for $URL: got $got, expected $MD5 (corrupt or changed download)"
  fi
  mv "$part" "$tarball"
  echo "fetch_cifar10: md5 ok ($MD5)"
fi

echo "fetch_cifar10: extracting into $DEST"
tar -xzf "$tarball" -C "$DEST" || die "cannot extract $tarball"
dir="$DEST/cifar-10-batches-bin"
for f in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin; do
  [ -f "$dir/$f" ] || die "$dir/$f missing after extraction"
  size=$(stat -c %s "$dir/$f")
  [ "$size" -eq 30730000 ] || die "$dir/$f has $size bytes, expected 30730000 (10000 records of 3073)"
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SIEVE_BUILD_DIR:-$root/build}"
abs_dir="$(cd "$dir" && pwd)"
cat <<MSG
fetch_cifar10: CIFAR-10 ready in $abs_dir (50000 train + 10000 test images)

Convert it into a Sieve dataset (one file, or add --set data.shards=K):
  $build/tools/shard_dataset --set data.source=cifar10 --input $abs_dir --output runs/cifar10/dataset.h5
or with several ranks:
  . $root/scripts/env.sh && mpirun -n 4 shard_dataset --set data.source=cifar10 --input $abs_dir --output runs/cifar10/dataset.h5
or through a config (configs/cifar10_paper.yaml sets data.source: cifar10):
  $build/tools/shard_dataset --config configs/cifar10_paper.yaml --input $abs_dir
MSG
