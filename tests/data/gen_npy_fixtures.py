#!/usr/bin/env python3
"""Writes the small .npy files of tests/data/fixtures with numpy itself, for test_data_npy:
each dtype the reader takes, format versions 1.0, 2.0 and 3.0, and two numpy writes the reader
refuses (Fortran order, big-endian). The values are exact in float32, so the test compares
them with ==. Run from anywhere: python3 tests/data/gen_npy_fixtures.py (needs numpy; Debian:
python3-numpy). The outputs are committed; rerun only to change them."""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def save(name, a, version=None):
    path = os.path.join(OUT, name)
    if version is None:
        np.save(path, a)  # numpy picks version 1.0 for these
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version)


os.makedirs(OUT, exist_ok=True)
# Regression: X (3, 2) float32 = arange / 4 - 0.5, y (3,) float64, y2 (3, 2) float32.
save("x_f4.npy", (np.arange(6, dtype=np.float32) / 4 - 0.5).reshape(3, 2))
save("y_f8.npy", np.array([0.5, -2.25, 1000.0]))
save("y2_f4.npy", np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32))
# Classification: X (3, 2) float64 and int64 labels; images (2, 1, 2, 3) uint8, uint8 labels;
# int32 labels.
save("x_f8.npy", np.array([[1.5, -1], [0, 2], [3, 0.25]]))
save("labels_i8.npy", np.array([2, 0, 1], dtype=np.int64))
save("img_u1.npy", (np.arange(12, dtype=np.uint16) * 23 % 256).astype(np.uint8).reshape(2, 1, 2, 3))
save("labels_u1.npy", np.array([1, 0], dtype=np.uint8))
save("labels_i4.npy", np.array([4, 0, 3], dtype=np.int32))
# The same (3, 2) float32 array in format versions 2.0 and 3.0.
save("x_f4_v2.npy", (np.arange(6, dtype=np.float32) / 4 - 0.5).reshape(3, 2), version=(2, 0))
save("x_f4_v3.npy", (np.arange(6, dtype=np.float32) / 4 - 0.5).reshape(3, 2), version=(3, 0))
# Refused: Fortran order, big-endian.
save("fortran_f4.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
save("big_endian_f4.npy", np.arange(3, dtype=">f4"))
