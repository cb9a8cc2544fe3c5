#!/usr/bin/env python3
"""The PyTorch DDP tutorial's main.py, as the baseline hddp's poly_train is compared with.

Launched by mpiexec; the process group uses gloo (Debian's torch has no MPI backend) with
rank and size taken from Open MPI's environment. Model Linear(1, 20) -> Linear(20, 1, no bias)
-> tanh, MinMax scaling of x and y to [-1, 1], 1000 epochs, 32 fresh uniform samples per rank
per epoch, Adam lr 1e-3, MSE, a log line every 100 epochs; rank 0 evaluates on
linspace(-3, 10, 32), plots to errors.pdf and prints timings for bench/poly_vs_pytorch.sh.
Usage: mpiexec -n P python3 bench/poly_tutorial.py OUTDIR [EPOCHS]
"""
import os
import socket
import sys
import time

t_process = time.time()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def f(x):
    return (x**3 + (x - 10) ** 4) / (x - 20) ** 2


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    print(f"Running DDP on rank {rank}/{size}.", flush=True)

    x_eval = np.linspace(-3, 10, 32).reshape(-1, 1)
    xs, ys = MinMaxScaler((-1, 1)), MinMaxScaler((-1, 1))
    xs.fit(x_eval)
    ys.fit(f(x_eval))

    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(1, 20), nn.Linear(20, 1, bias=False), nn.Tanh())
    ddp = DDP(model)
    loss_fn = nn.MSELoss()
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    loss900 = float("nan")
    dist.barrier()
    t0 = time.time()
    for epoch in range(epochs):
        x = rng.uniform(-3, 10, (32, 1))
        xt = torch.tensor(xs.transform(x), dtype=torch.float32)
        yt = torch.tensor(ys.transform(f(x)), dtype=torch.float32)
        opt.zero_grad()
        loss = loss_fn(ddp(xt), yt)
        loss.backward()
        opt.step()
        if epoch % 100 == 0:
            print(f"epoch {epoch}, loss = {loss.item()}, rank {rank}/{size} ({socket.gethostname()}).", flush=True)
        if epoch == 900:
            loss900 = loss.item()
    train_s = time.time() - t0
    losses = [None] * size
    dist.all_gather_object(losses, loss900)
    if rank == 0:
        with torch.no_grad():
            g = ys.inverse_transform(model(torch.tensor(xs.transform(x_eval), dtype=torch.float32)).numpy())
        err = np.abs(f(x_eval) - g)
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        ax[0].plot(x_eval, f(x_eval), label="f(x)")
        ax[0].plot(x_eval, g, "--", label="g(x)")
        ax[0].set_title(f"{epochs} epochs of training")
        ax[0].legend()
        ax[1].plot(x_eval, err)
        ax[1].set_title("Absolute difference between prediction and actual function")
        fig.savefig(os.path.join(out, "errors.pdf"))
        print("plot evaluation result to errors.pdf", flush=True)
        print(f"RESULT train_s={train_s:.4f} ms_per_step={1e3 * train_s / epochs:.4f} "
              f"loss900_max={max(losses):.6g} mean_err={err.mean():.4f} max_err={err.max():.4f} "
              f"process_s={time.time() - t_process:.3f}", flush=True)
    dist.barrier()  # peers wait for rank 0's plot: destroying the group with peers gone can hang
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
