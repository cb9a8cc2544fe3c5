#!/usr/bin/env python3
"""The first images of Fashion-MNIST (or MNIST) as uncompressed IDX files, for runs that should
not decompress the whole set on every rank (the tests, the scaling study).

Usage: fmnist_subset.py SRC_DIR DST_DIR N_TRAIN N_TEST
SRC_DIR holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (Debian's dataset-fashion-mnist:
/usr/share/datasets/fashion-mnist); DST_DIR gets the same names without .gz, N of each split.
"""
import gzip
import os
import struct
import sys


def main(src, dst, n_train, n_test):
    os.makedirs(dst, exist_ok=True)
    for split, n in (("train", int(n_train)), ("t10k", int(n_test))):
        for kind in ("images-idx3", "labels-idx1"):
            raw = gzip.open(f"{src}/{split}-{kind}-ubyte.gz").read()
            nd = raw[3]
            dims = struct.unpack(f">{nd}I", raw[4:4 + 4 * nd])
            per = 1
            for d in dims[1:]:
                per *= d
            body = raw[4 + 4 * nd:][:n * per]
            with open(f"{dst}/{split}-{kind}-ubyte", "wb") as f:
                f.write(raw[:4] + struct.pack(">I", n) + raw[8:4 + 4 * nd] + body)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:5])
