#!/usr/bin/env python3
"""Reference data from PyTorch for the optimizer kit: Adam/AdamW bits, learning-rate schedules,
global-norm gradient clipping (tests/core/test_optim.cpp, tests/core/test_schedule.cpp).

    apt-get install -y python3-torch        # Debian bookworm: PyTorch 1.13
    /usr/bin/python3 tests/core/gen_optim_kit_reference.py tests/core/data

writes three files into the folder given:

optim_bits_reference.txt: torch.optim.Adam and AdamW (foreach=False) stepped on one flat
tensor of N values with given gradients, float32 and float64; the C++ test must reproduce every
value to the bit. The gradients are random with full mantissas and magnitudes from 1e-4 to 2,
so that any difference in the order of roundings shows. PyTorch's CPU kernels differ in the
last bit between its builds: its AVX2 and AVX-512 kernels use fused multiply-adds, its DEFAULT
ones do not; this generator refuses to run on the DEFAULT ones (ATEN_CPU_CAPABILITY=default
or a CPU without AVX2).
    torch <version> capability <AVX2|AVX512>
    dtype <float32|float64> n <N> steps <K>
    init <N> <values>                   initial parameters
    grad <t> <N> <values>               gradient of step t (K lines)
    case <name> <adam|adamw> lr <v> beta1 <v> beta2 <v> eps <v> weight_decay <v> lrs <K> <values>
                                        lrs: the learning rate of each step (set before it)
    params <t> <N> <values>             after step t (K lines)
    exp_avg <N> <values>                after the last step
    exp_avg_sq <N> <values>
    end
and then, for the same cases on LARGE_N values drawn from splitmix64 (a rounding difference in
one value of a hundred shows there), only FNV-1a 64 hashes of the values' bytes (little-endian):
    large <float32|float64> n <N> steps <K> seed <s>
    case ... (as above)
    hashes params <K hex> exp_avg <hex> exp_avg_sq <hex>
    end
Draws: splitmix64 from the seed; u = (x >> 11) * 2^-53; init = 4u - 2; a gradient value is
(2u - 1) * 2^-k with k = (next x) % 15, rounded to the dtype (init for all values first, then the
gradients step by step).

schedule_reference.txt: the learning rate of each of STEPS optimizer steps (the optimizer's lr
when the step runs) under PyTorch's schedulers, stepped once after each optimizer step:
LinearLR warmup, StepLR, CosineAnnealingLR, LambdaLR(1.0) for "constant", combined with
SequentialLR(milestones=[W]) when there is a warmup.
    case <name> kind <constant|step|cosine> base_lr <v> warmup <W> start_factor <v>
         step_size <v> gamma <v> t_max <v> eta_min <v> spec <spec|-> total <T>
    lr <STEPS> <values>
spec/total: the parse_lr_schedule arguments that give this schedule (spec, base_lr, total,
warmup), or spec '-' where the parser cannot express it (t_max other than total - warmup, or a
start factor other than 1/3).

clip_reference.txt: torch.nn.utils.clip_grad_norm_(params, max_norm) over several gradient
tensors, float32 and float64: the total norm PyTorch returns (a value of the dtype) and the
gradients after clipping, flattened in order.
    case <name> <dtype> max_norm <v> shapes <k> <numel...>
    grad <N> <values>                   before
    total_norm <v>
    clipped <N> <values>
    end

Values are Python repr() of doubles (a float32 value is exact in a double): exact round trip.
"""
import math
import os
import sys
import warnings

import torch

OPT_N = 40  # two of ATen's 16-float vector blocks and a scalar tail of 8
OPT_STEPS = 6
LARGE_N = 4101  # 256 blocks of 16 and a tail
LARGE_SEED = 2024
SCHED_STEPS = 25


def fmt(values):
    return " ".join(repr(float(v)) for v in values)


def capability():
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":")[1].strip()
    return "unknown"


def random_values(gen, n, dtype, lo=-1.0, hi=1.0):
    return (torch.rand(n, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


# name, class, settings; lrs: a learning rate per step (None: constant lr)
OPT_CASES = [
    ("adam", "adam", dict(lr=0.01), None),
    ("adam_wd", "adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05), None),
    ("adamw_default", "adamw", dict(lr=0.01), None),  # weight_decay 1e-2
    ("adamw_no_decay", "adamw", dict(lr=0.003, weight_decay=0.0), None),
    ("adamw_strong", "adamw", dict(lr=0.05, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.3), None),
    ("adamw_scheduled", "adamw", dict(lr=0.02, weight_decay=0.1),
     [0.02 * (1.0 / 3 + ((1 - 1.0 / 3) * t) / 3) if t < 3 else 0.02 * (1 + math.cos(math.pi * (t - 3) / 3)) / 2 + 1e-4
      for t in range(OPT_STEPS)]),
]


MASK64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next() >> 11) * 2.0**-53


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def tensor_hash(t):
    return f"{fnv1a64(t.detach().contiguous().numpy().tobytes()):016x}"


def run_case(kind, kw, lrs, init, grads):
    """PyTorch's trajectory: the parameters after each step and the final optimizer state."""
    p = init.clone().requires_grad_(True)
    cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
    opt = cls([p], foreach=False, **kw)
    group = opt.param_groups[0]
    after = []
    for g, lr in zip(grads, lrs):
        group["lr"] = lr
        p.grad = g.clone()
        opt.step()
        after.append(p.detach().clone())
    return group, after, opt.state[p]


def case_line(name, kind, kw, group, lrs):
    beta1, beta2 = group["betas"]  # the settings with PyTorch's defaults filled in
    return (f"case {name} {kind} lr {kw['lr']!r} beta1 {beta1!r} beta2 {beta2!r} eps {group['eps']!r} "
            f"weight_decay {group['weight_decay']!r} lrs {len(lrs)} {fmt(lrs)}\n")


def write_optim_bits(out):
    out.write("# generated by tests/core/gen_optim_kit_reference.py; do not edit\n")
    out.write(f"torch {torch.__version__} capability {capability()}\n")
    for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
        gen = torch.Generator().manual_seed(1234)
        init = random_values(gen, OPT_N, dtype, -2.0, 2.0)
        grads = []
        for _ in range(OPT_STEPS):
            scale = 10.0 ** random_values(gen, OPT_N, torch.float64, -4.0, 0.3)
            grads.append((random_values(gen, OPT_N, torch.float64) * scale).to(dtype))
        out.write(f"dtype {dname} n {OPT_N} steps {OPT_STEPS}\n")
        out.write(f"init {OPT_N} {fmt(init.tolist())}\n")
        for t, g in enumerate(grads, 1):
            out.write(f"grad {t} {OPT_N} {fmt(g.tolist())}\n")
        for name, kind, kw, lrs in OPT_CASES:
            lrs = lrs or [kw["lr"]] * OPT_STEPS
            group, after, st = run_case(kind, kw, lrs, init, grads)
            out.write(case_line(name, kind, kw, group, lrs))
            for t, p in enumerate(after, 1):
                out.write(f"params {t} {OPT_N} {fmt(p.tolist())}\n")
            out.write(f"exp_avg {OPT_N} {fmt(st['exp_avg'].tolist())}\n")
            out.write(f"exp_avg_sq {OPT_N} {fmt(st['exp_avg_sq'].tolist())}\n")
            out.write("end\n")
    for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
        rng = SplitMix64(LARGE_SEED)
        init = torch.tensor([4.0 * rng.uniform() - 2.0 for _ in range(LARGE_N)], dtype=torch.float64).to(dtype)
        grads = []
        for _ in range(OPT_STEPS):
            g = []
            for _ in range(LARGE_N):
                u = rng.uniform()
                g.append((2.0 * u - 1.0) * 2.0**-(rng.next() % 15))
            grads.append(torch.tensor(g, dtype=torch.float64).to(dtype))
        out.write(f"large {dname} n {LARGE_N} steps {OPT_STEPS} seed {LARGE_SEED}\n")
        for name, kind, kw, lrs in OPT_CASES:
            lrs = lrs or [kw["lr"]] * OPT_STEPS
            group, after, st = run_case(kind, kw, lrs, init, grads)
            out.write(case_line(name, kind, kw, group, lrs))
            out.write(f"hashes params {len(after)} {' '.join(tensor_hash(p) for p in after)} "
                      f"exp_avg {tensor_hash(st['exp_avg'])} exp_avg_sq {tensor_hash(st['exp_avg_sq'])}\n")
            out.write("end\n")


# name, base_lr, warmup W, start_factor, main kind, main settings, spec or None, total steps
SCHED_CASES = [
    ("constant", 0.1, 0, 1.0 / 3, "constant", {}, "constant", 25),
    ("constant_warmup", 0.1, 5, 1.0 / 3, "constant", {}, "constant", 25),
    ("step", 0.1, 0, 1.0 / 3, "step", dict(step_size=7, gamma=0.5), "step:7:0.5", 25),
    ("step_warmup", 0.03, 4, 1.0 / 3, "step", dict(step_size=3, gamma=0.1), "step:3:0.1", 25),
    ("step_warmup_gamma_0.9", 1e-3, 6, 1.0 / 3, "step", dict(step_size=2, gamma=0.9), "step:2:0.9", 25),
    ("cosine", 0.1, 0, 1.0 / 3, "cosine", dict(T_max=25, eta_min=0.0), "cosine", 25),
    ("cosine_warmup", 3e-4, 5, 1.0 / 3, "cosine", dict(T_max=20, eta_min=0.0), "cosine", 25),
    ("cosine_eta_min_warmup", 0.01, 5, 1.0 / 3, "cosine", dict(T_max=20, eta_min=1e-4), "cosine:1e-4", 25),
    ("cosine_eta_min", 0.5, 0, 1.0 / 3, "cosine", dict(T_max=25, eta_min=0.05), "cosine:0.05", 25),
    # Past T_max: PyTorch's cosine rises again (its chain's special case at k = T_max + 1).
    ("cosine_past_t_max", 0.1, 0, 1.0 / 3, "cosine", dict(T_max=10, eta_min=0.0), None, 25),
    ("cosine_past_t_max_warmup", 0.2, 3, 1.0 / 3, "cosine", dict(T_max=8, eta_min=0.01), None, 25),
    ("cosine_warmup_start_0.1", 0.05, 10, 0.1, "cosine", dict(T_max=15, eta_min=0.0), None, 25),
    ("warmup_longer_than_run", 0.1, 30, 1.0 / 3, "constant", {}, "constant", 25),
]


def torch_schedule(opt, kind, kw):
    if kind == "constant":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0)
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, **kw)
    return torch.optim.lr_scheduler.CosineAnnealingLR(opt, **kw)


def write_schedules(out):
    out.write("# generated by tests/core/gen_optim_kit_reference.py; do not edit\n")
    out.write(f"torch {torch.__version__}\n")
    for name, base, warm, start, kind, kw, spec, total in SCHED_CASES:
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=base)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SequentialLR's step(0) at the milestone warns
            if warm > 0:
                w = torch.optim.lr_scheduler.LinearLR(opt, start_factor=start, end_factor=1.0, total_iters=warm)
                main = torch_schedule(opt, kind, kw)
                sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[w, main], milestones=[warm])
            else:
                sched = torch_schedule(opt, kind, kw)
            lrs = []
            for _ in range(SCHED_STEPS):
                lrs.append(opt.param_groups[0]["lr"])
                p.grad = torch.zeros(1)
                opt.step()
                sched.step()
        out.write(f"case {name} kind {kind} base_lr {base!r} warmup {warm} start_factor {start!r} "
                  f"step_size {kw.get('step_size', 1)} gamma {kw.get('gamma', 1.0)!r} t_max {kw.get('T_max', 1)} "
                  f"eta_min {kw.get('eta_min', 0.0)!r} spec {spec or '-'} total {total}\n")
        out.write(f"lr {len(lrs)} {fmt(lrs)}\n")


CLIP_CASES = [
    # name, shapes, gradient scale, max_norm (None: the norm itself, rounded to the dtype)
    ("mlp_clipped", [(4, 3), (4,), (2, 4), (2,)], 1.0, 0.5),
    ("mlp_not_clipped", [(4, 3), (4,), (2, 4), (2,)], 1.0, 100.0),
    ("mlp_max_is_norm", [(4, 3), (4,), (2, 4), (2,)], 1.0, None),
    ("larger_clipped", [(16, 25), (16,), (6, 16), (6,)], 0.05, 0.25),
    ("larger_tiny_grads", [(16, 25), (16,), (6, 16), (6,)], 1e-5, 1.0),
    ("one_tensor_huge_grads", [(200,)], 1e3, 1.0),
]


def write_clip(out):
    out.write("# generated by tests/core/gen_optim_kit_reference.py; do not edit\n")
    out.write(f"torch {torch.__version__} capability {capability()}\n")
    for dtype, dname in ((torch.float32, "float32"), (torch.float64, "float64")):
        gen = torch.Generator().manual_seed(99)
        for name, shapes, scale, max_norm in CLIP_CASES:
            params = []
            for s in shapes:
                n = math.prod(s)
                p = torch.zeros(s, dtype=dtype, requires_grad=True)
                p.grad = (random_values(gen, n, torch.float64) * scale).to(dtype).reshape(s)
                params.append(p)
            before = torch.cat([p.grad.reshape(-1) for p in params]).tolist()
            if max_norm is None:
                max_norm = torch.norm(torch.cat([p.grad.reshape(-1) for p in params])).item()
            total = torch.nn.utils.clip_grad_norm_(params, max_norm)
            after = torch.cat([p.grad.reshape(-1) for p in params]).tolist()
            out.write(f"case {name} {dname} max_norm {max_norm!r} shapes {len(shapes)} "
                      f"{' '.join(str(math.prod(s)) for s in shapes)}\n")
            out.write(f"grad {len(before)} {fmt(before)}\n")
            out.write(f"total_norm {total.item()!r}\n")
            out.write(f"clipped {len(after)} {fmt(after)}\n")
            out.write("end\n")


def main(folder):
    cap = capability()
    if cap not in ("AVX2", "AVX512"):
        sys.exit(f"PyTorch runs its {cap} CPU kernels here: the reference needs its AVX2 or AVX512 ones "
                 "(unset ATEN_CPU_CAPABILITY; a CPU with AVX2)")
    torch.set_num_threads(1)
    for fname, write in (("optim_bits_reference.txt", write_optim_bits), ("schedule_reference.txt", write_schedules),
                         ("clip_reference.txt", write_clip)):
        with open(os.path.join(folder, fname), "w") as out:
            write(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gen_optim_kit_reference.py OUTPUT_FOLDER")
    main(sys.argv[1])
