#!/usr/bin/env python3
"""Which OpenBLAS kernel gives PyTorch (Debian's, BLAS_INFO=generic: the system OpenBLAS) its
best on this CPU: the one OpenBLAS detects (OPENBLAS_CORETYPE unset), SkylakeX where the CPU has
AVX-512, Haswell where it has AVX2. Each candidate runs in its own process: the product is
checked against float64 first (a kernel that computes wrong results, or a probe that fails, is
reported with the reason and left out), then timed. Prints one JSON line: the best candidate ("" = as detected), the detected core's
name, and every candidate's GFLOP/s or error.
Usage: python3 bench/step/openblas_core.py [M N K]
"""
import json
import os
import subprocess
import sys

PROBE = r"""
import sys, time, torch
M, N, K = map(int, sys.argv[1:4])
torch.set_num_threads(1)
a, w = torch.randn(M, K), torch.randn(N, K)
ref = (a.double() @ w.double().t()).float()
y = a @ w.t()
err = float((y - ref).abs().max() / ref.abs().max())
if not err < 1e-5:
    print("WRONG", err); sys.exit(0)
n = 0; t0 = time.perf_counter()
while time.perf_counter() - t0 < 0.5:
    y = a @ w.t(); n += 1
print("GFLOPS", 2.0 * M * N * K * n / (time.perf_counter() - t0) / 1e9)
"""


def probe(core, shape):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_VERBOSE="2")
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    try:
        run = subprocess.run([sys.executable, "-c", PROBE, *shape], env=env, capture_output=True, text=True,
                             timeout=300)
    except subprocess.TimeoutExpired:
        return "?", "no answer in 300 s"
    out = (run.stdout + " " + run.stderr).split()  # OPENBLAS_VERBOSE writes "Core: NAME" to stderr
    detected = out[out.index("Core:") + 1] if "Core:" in out else "?"
    if "GFLOPS" in out:
        return detected, float(out[out.index("GFLOPS") + 1])
    if "WRONG" in out:
        return detected, "wrong results (max relative error %s)" % out[out.index("WRONG") + 1]
    last = (run.stderr.strip().splitlines() or ["no output"])[-1]
    return detected, "failed (exit %d: %s)" % (run.returncode, last)


def main():
    shape = sys.argv[1:4] if len(sys.argv) >= 4 else ["256", "1024", "1024"]
    flags = open("/proc/cpuinfo").read()
    candidates = [""] + (["SkylakeX"] if " avx512f" in flags else []) + (["Haswell"] if " avx2" in flags else [])
    results, detected = {}, "?"
    for c in candidates:
        name, gflops = probe(c, shape)
        if c == "":
            detected = name
        results[c or "detected"] = gflops  # GFLOP/s, or why none
    ok = {c: results[c or "detected"] for c in candidates if isinstance(results[c or "detected"], float)}
    best = max(ok, key=ok.get) if ok else ""
    print(json.dumps({"best": best, "detected": detected, "gflops": results}))


if __name__ == "__main__":
    main()
