#!/usr/bin/env python3
"""PyTorch's side of bench/step_vs_pytorch.sh: the model poly_train builds for --hidden W,W
(Linear(1, W), Tanh, Linear(W, W), Linear(W, 1, bias=False), Tanh), DDP over gloo, Adam lr 1e-3,
MSE, a fresh batch of B uniform samples per rank per step (x in [-3, 10] scaled to [-1, 1], the
tutorial's f scaled likewise), the same steps as hddp's run. Launched by mpiexec (rank and size
from Open MPI's environment); threads from OMP_NUM_THREADS. Rank 0 prints one JSON line:
seconds per step over the timed steps (after WARMUP untimed ones), threads, ranks.
With HDDP_TORCH_AUTOCAST=bf16 the forward and the loss run under torch.autocast("cpu",
dtype=torch.bfloat16) (float master weights, bf16 products), as hddp's --precision bf16.
Usage: mpiexec -n P python3 bench/step/step_pytorch.py W BATCH STEPS [WARMUP]
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    width, batch, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("HDDP_TORCH_PORT", "29519"))
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(1, width), nn.Tanh(), nn.Linear(width, width),
                          nn.Linear(width, 1, bias=False), nn.Tanh())
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(1 + rank)
    autocast = os.environ.get("HDDP_TORCH_AUTOCAST", "") == "bf16"

    def f(x):
        return (x**3 + (x - 10) ** 4) / (x - 20) ** 2

    fmin, fmax = float(f(torch.tensor(10.0))), float(f(torch.tensor(-3.0)))  # f is decreasing on [-3, 10]

    def step():
        x = torch.rand(batch, 1, generator=gen) * 13.0 - 3.0
        xt = (x + 3.0) / 13.0 * 2.0 - 1.0
        yt = (f(x) - fmin) / (fmax - fmin) * 2.0 - 1.0
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(ddp(xt).float(), yt)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        print(json.dumps({"step_s": elapsed / steps, "loss": float(loss), "ranks": size, "threads": threads,
                          "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
