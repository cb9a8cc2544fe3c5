#!/usr/bin/env python3
"""PyTorch's side of the GPT comparisons: the model gpt_train trains (core/gpt.h), written the
way nanoGPT writes it, with parameter names equal to hddp's ("0.wte", "1.1.weight", ...: an
nn.Sequential of residual nn.Sequentials), so hddp's safetensors load with load_state_dict.

  Embedding (wte, wpe) -> n x [Residual(LayerNorm, Linear(C, 3C), causal attention, Linear(C, C)),
  Residual(LayerNorm, Linear(C, 4C), GELU(tanh), Linear(4C, C))] -> LayerNorm -> head tied to wte

Attention is nanoGPT's explicit form (q k^T / sqrt(D), masked_fill, softmax, @ v): PyTorch 1.13
has no fused scaled_dot_product_attention.

Modes (launched by mpiexec for DDP over gloo: rank and size from Open MPI's environment,
threads from OMP_NUM_THREADS):
  step  LAYERS HEADS DIM CONTEXT BATCH VOCAB STEPS
        the training step timed: random tokens, AdamW with the two weight-decay groups,
        clipping at 1.0; prints one JSON line: median ms per step (after 3 warm-up steps) and
        the peak RSS of rank 0 in MiB.
  train LAYERS HEADS DIM CONTEXT BATCH STEPS EVAL_EVERY SEED [TEXT_DIR]
        a real run on Debian's fortunes, as gpt_train does it: the same files and split (last
        10 % validates), random windows per rank (numpy, seeded by SEED and the rank), AdamW
        (lr 1e-3, betas 0.9/0.99, weight decay 0.1 on the Linear weights only), LinearLR from
        1/3 over 100 steps then cosine to 1e-4, clipping 1.0; every EVAL_EVERY steps the mean
        loss over 240 validation windows (a fixed draw), one JSON line each.
Environment: HDDP_TORCH_AUTOCAST=bf16: the step under torch.autocast("cpu", bfloat16);
HDDP_TORCH_PORT: the rendezvous port.
"""
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Embedding(nn.Module):
    def __init__(self, vocab, dim, context):
        super().__init__()
        self.wte = nn.Parameter(torch.empty(vocab, dim))
        self.wpe = nn.Parameter(torch.empty(context, dim))

    def forward(self, idx):
        return F.embedding(idx, self.wte) + self.wpe[: idx.shape[1]]


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.dim, self.heads = dim, heads

    def forward(self, qkv):
        B, T, _ = qkv.shape
        q, k, v = qkv.split(self.dim, dim=2)
        shape = (B, T, self.heads, self.dim // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        mask = torch.ones(T, T, dtype=torch.bool, device=qkv.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return (att @ v).transpose(1, 2).reshape(B, T, self.dim)


class Residual(nn.Sequential):
    def forward(self, x):
        return x + super().forward(x)


class TiedHead(nn.Module):
    """y = x wte^T, wte the embedding's (not registered again: one parameter)."""

    def __init__(self, embedding):
        super().__init__()
        object.__setattr__(self, "embedding", embedding)

    def forward(self, x):
        return x @ self.embedding.wte.t()


def build_model(vocab, context, layers, heads, dim):
    emb = Embedding(vocab, dim, context)
    mods = [emb]
    for _ in range(layers):
        mods.append(Residual(nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), CausalSelfAttention(dim, heads), nn.Linear(dim, dim)))
        mods.append(Residual(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)))
    mods += [nn.LayerNorm(dim), TiedHead(emb)]
    return nn.Sequential(*mods)


def gpt2_init(model, layers):
    """GPT-2's initialisation (nanoGPT's _init_weights and c_proj's scaled std)."""
    for name, p in model.named_parameters():
        if name.endswith(".bias"):
            nn.init.zeros_(p)
        elif p.dim() == 1:
            nn.init.ones_(p)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith(".3.weight") else 0.02
            nn.init.normal_(p, 0.0, std)


def adamw(model, lr, weight_decay, beta2):
    """Two groups: the Linear weights decay; biases, LayerNorm and embeddings do not."""
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and n not in ("0.wte", "0.wpe")]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and n not in ("0.wte", "0.wpe"))]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, beta2), eps=1e-8)


def setup():
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("HDDP_TORCH_PORT", "29531"))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    return rank, size


def step_fn(ddp, opt, autocast):
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = ddp(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        return loss.item()
    return step


def mode_step(args):
    layers, heads, dim, context, batch, vocab, steps = (int(a) for a in args)
    rank, size = setup()
    autocast = os.environ.get("HDDP_TORCH_AUTOCAST", "") == "bf16"
    torch.manual_seed(0)
    model = build_model(vocab, context, layers, heads, dim)
    gpt2_init(model, layers)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = adamw(model, 1e-3, 0.1, 0.99)
    step = step_fn(ddp, opt, autocast)
    g = torch.Generator().manual_seed(rank)
    x = torch.randint(0, vocab, (batch, context), generator=g)
    y = torch.randint(0, vocab, (batch, context), generator=g)
    times = []
    for s in range(steps + 3):
        dist.barrier()
        t0 = time.perf_counter()
        step(x, y)
        if s >= 3:
            times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if rank == 0:
        print(json.dumps({"step_ms": 1e3 * float(np.median(times)), "peak_rss_mb": rss,
                          "params": sum(p.numel() for p in model.parameters())}), flush=True)
    dist.destroy_process_group()


def fortunes(text_dir):
    files = sorted(f for f in os.listdir(text_dir)
                   if not f.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(text_dir, f)))
    data = b"".join(open(os.path.join(text_dir, f), "rb").read() for f in files)
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)


def windows(tokens, starts, context):
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    w = torch.from_numpy(tokens[idx])
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()


def mode_train(args):
    layers, heads, dim, context, batch, steps, eval_every, seed = (int(a) for a in args[:8])
    text_dir = args[8] if len(args) > 8 else "/usr/share/games/fortunes"
    rank, size = setup()
    autocast = os.environ.get("HDDP_TORCH_AUTOCAST", "") == "bf16"
    tokens = fortunes(text_dir)
    n_train = int(len(tokens) * 0.9)
    train, val = tokens[:n_train], tokens[n_train:]
    torch.manual_seed(seed)
    model = build_model(256, context, layers, heads, dim)
    gpt2_init(model, layers)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = adamw(model, 1e-3, 0.1, 0.99)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / 3, total_iters=100)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - 100, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[100])
    step = step_fn(ddp, opt, autocast)
    rng = np.random.default_rng([seed, rank])
    vx, vy = windows(val, np.random.default_rng([seed, 99]).integers(0, len(val) - context, 240), context)
    t_train = 0.0
    for s in range(steps):
        x, y = windows(train, rng.integers(0, len(train) - context, batch), context)
        t0 = time.perf_counter()
        step(x, y)
        sched.step()
        t_train += time.perf_counter() - t0
        if (s + 1) % eval_every == 0:
            model.eval()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                lo, hi = rank * 240 // size, (rank + 1) * 240 // size
                logits = model(vx[lo:hi]).float()
                part = torch.tensor([F.cross_entropy(logits.view(-1, 256), vy[lo:hi].reshape(-1), reduction="sum").item(),
                                     float((hi - lo) * context)], dtype=torch.float64)
            dist.all_reduce(part)
            model.train()
            if rank == 0:
                print(json.dumps({"step": s + 1, "val_loss": part[0].item() / part[1].item(), "train_s": t_train}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    {"step": mode_step, "train": mode_train}[sys.argv[1]](sys.argv[2:])
