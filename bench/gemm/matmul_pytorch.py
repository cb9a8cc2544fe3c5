"""PyTorch's bf16 and float matmul (oneDNN on AMX / AVX512_BF16 for bf16, OpenBLAS for float) on one
thread, the anchor for gemm_bf16 (bench/gemm_bf16_vs_pytorch.sh).

  python3 matmul_pytorch.py OP M N K [OP M N K ...]   one JSON line per shape and dtype:
  {"impl": "pytorch", "dtype": "bf16", "op": "NN", "M": .., "N": .., "K": .., "gflops": .., "ms": ..}

C = A op(B) (torch.mm), A (M x K) contiguous, B (K x N) contiguous for OP NN, the transpose of a
contiguous (N x K) for NT (a linear layer's weight); the median of 7 timed runs of about 0.2 s
each after a warm-up. Threads: torch.set_num_threads(OMP_NUM_THREADS or 1).
"""
import json
import os
import sys
import time

import torch


def time_mm(a, b, seconds=0.2):
    torch.mm(a, b)
    n, t0 = 1, time.perf_counter()
    torch.mm(a, b)
    dt = time.perf_counter() - t0
    n = max(1, int(seconds / max(dt, 1e-6)))
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            torch.mm(a, b)
        runs.append((time.perf_counter() - t0) / n)
    runs.sort()
    return runs[len(runs) // 2]


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = sys.argv[1:]
    if len(args) == 0 or len(args) % 4 or any(op not in ("NN", "NT") for op in args[::4]):
        sys.exit("usage: matmul_pytorch.py OP M N K [OP M N K ...]   (OP: NN or NT)")
    g = torch.Generator().manual_seed(42)
    for i in range(0, len(args), 4):
        op, (m, n, k) = args[i], (int(x) for x in args[i + 1:i + 4])
        a = torch.rand(m, k, generator=g) * 2 - 1
        b = torch.rand(k, n, generator=g) * 2 - 1 if op == "NN" else (torch.rand(n, k, generator=g) * 2 - 1)
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "float")):
            bb = b.to(dtype) if op == "NN" else b.to(dtype).t()
            s = time_mm(a.to(dtype), bb)
            print(json.dumps({"impl": "pytorch", "dtype": name, "op": op, "M": m, "N": n, "K": k,
                              "gflops": round(2.0 * m * n * k / s * 1e-9, 1), "ms": round(s * 1e3, 4)}), flush=True)


if __name__ == "__main__":
    main()
