#!/usr/bin/env python3
"""hddp's float -> bf16 conversion against PyTorch's tensor.to(torch.bfloat16), bit for bit:
every one of the 65536 high halves with low halves around the rounding tie, the denormals and
NaNs among them, and a million random patterns; both hddp's array conversion (vectorised,
threaded) and its one-value rule.
Usage: bf16_vs_torch.py BF16_BITS_BINARY SCRATCH_DIR"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"FAIL: {e} (bash scripts/setup-deps.sh tests installs python3-torch and python3-numpy)")
    sys.exit(1)

binary, scratch = sys.argv[1], sys.argv[2]
os.makedirs(scratch, exist_ok=True)
hi = np.arange(65536, dtype=np.uint32) << 16
lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
patterns = np.concatenate([(hi[:, None] | lows[None, :]).ravel(),
                           np.random.default_rng(7).integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)])
src, dst = os.path.join(scratch, "in.f32"), os.path.join(scratch, "out.bf16")
patterns.tofile(src)
subprocess.run([binary, src, dst], check=True, timeout=300)
got = np.fromfile(dst, dtype=np.uint16)
want = torch.from_numpy(patterns.view(np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
n = len(patterns)
failed = False
for name, block in (("array conversion", got[:n]), ("one-value rule", got[n:])):
    bad = np.nonzero(block != want)[0]
    if len(bad):
        i = bad[0]
        print(f"FAIL: {name}: {len(bad)} of {n} patterns differ from PyTorch, the first {patterns[i]:#010x}: "
              f"hddp {block[i]:#06x}, PyTorch {want[i]:#06x}")
        failed = True
    else:
        print(f"ok: {name}: {n} patterns bit for bit PyTorch's (torch {torch.__version__})")
for f in (src, dst):
    os.remove(f)
sys.exit(1 if failed else 0)
