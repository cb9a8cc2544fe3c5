#!/usr/bin/env python3
"""PyTorch's side of bench/mnist_vs_pytorch.sh: the classifier mnist_train trains, the way a
PyTorch user writes it. Fashion-MNIST from the same IDX files (gzip + numpy, no torchvision),
x / 255 (ToTensor), an MLP 784-W-W-10 with ReLU, CrossEntropyLoss, Adam lr 1e-3, batch B per
rank, DistributedSampler(shuffle=True, seed SEED) with set_epoch, DDP over gloo, the weights
from torch.manual_seed(SEED). Launched by mpiexec (rank and size from Open MPI's environment),
threads from OMP_NUM_THREADS. Each epoch rank 0 prints a JSON line: epoch, training seconds
(the step loop only), test accuracy and loss (the whole test set, sharded over the ranks and
reduced), peak RSS of this rank in MiB.
MODEL cnn: mnist_train --model cnn's network instead, Conv2d(1,32,3,padding=1) ReLU MaxPool2d(2)
Conv2d(32,64,3,padding=1) ReLU MaxPool2d(2) Flatten Linear(3136,128) ReLU Linear(128,10), on the
images as 1 x 28 x 28 (PyTorch runs its convolutions through oneDNN, torch.backends.mkldnn).
Usage: mpiexec -n P python3 bench/mnist/mnist_pytorch.py DATA_DIR EPOCHS [BATCH] [WIDTH] [MODEL] [SEED]
(defaults 64, 256, mlp, 0).
Environment: HDDP_TORCH_AUTOCAST=bf16 (below); HDDP_TORCH_LIMIT_TRAIN=N: the first N training
images only (mnist_train --limit-train N); HDDP_TORCH_BUCKET_MB=X: DDP's bucket_cap_mb (25 by
default); HDDP_TORCH_COMM_HOOK=fp16: DDP's fp16_compress_hook, gradients on the wire as fp16 (half
the bytes; PyTorch 1.13's gloo has no bf16 allreduce: "Invalid scalar type").
"""
import gzip
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def read_idx(path):
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    data_dir, epochs = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 256
    kind = sys.argv[5] if len(sys.argv) > 5 else "mlp"
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    # HDDP_TORCH_AUTOCAST=bf16: the training step under torch.autocast("cpu", bfloat16) (float
    # master weights, bf16 products), as mnist_train --precision bf16.
    autocast = os.environ.get("HDDP_TORCH_AUTOCAST", "") == "bf16"
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("HDDP_TORCH_PORT", "29521"))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(seed)

    def load(prefix):
        x = read_idx(f"{data_dir}/{prefix}-images-idx3-ubyte.gz")
        y = read_idx(f"{data_dir}/{prefix}-labels-idx1-ubyte.gz")
        return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))

    (xtr, ytr), (xte, yte) = load("train"), load("t10k")
    limit = int(os.environ.get("HDDP_TORCH_LIMIT_TRAIN", "0"))
    if limit > 0:
        xtr, ytr = xtr[:limit], ytr[:limit]
    train = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(train, num_replicas=size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(train, batch_size=batch, sampler=sampler)
    if kind == "cnn":
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
        prep = lambda x: x.float().reshape(-1, 1, 28, 28) / 255.0  # noqa: E731 (NCHW, as hddp)
    else:
        prep = lambda x: x.float() / 255.0  # noqa: E731
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10))
    ddp = DDP(model, bucket_cap_mb=float(os.environ.get("HDDP_TORCH_BUCKET_MB", "25")))
    if os.environ.get("HDDP_TORCH_COMM_HOOK", "") == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    n_test = xte.shape[0]
    lo, hi = n_test * rank // size, n_test * (rank + 1) // size
    elapsed = 0.0
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        dist.barrier()
        t0 = time.perf_counter()
        for xb, yb in loader:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(ddp(prep(xb)).float(), yb)
            loss.backward()
            opt.step()
        train_s = time.perf_counter() - t0
        elapsed += train_s
        with torch.no_grad():
            logits = model(prep(xte[lo:hi]))
            stats = torch.tensor([float((logits.argmax(1) == yte[lo:hi]).sum()),
                                  float(nn.functional.cross_entropy(logits, yte[lo:hi], reduction="sum"))],
                                 dtype=torch.float64)
        dist.all_reduce(stats)
        if rank == 0:
            print(json.dumps({"epoch": epoch, "train_s": train_s, "elapsed_train_s": elapsed,
                              "test_accuracy": float(stats[0]) / n_test, "test_loss": float(stats[1]) / n_test,
                              "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
