"""One Conv2d in PyTorch (oneDNN), the shapes and passes of bench_layers' conv/ rows: batch 64,
float32 NCHW, 3x3, pad 1, stride 1; forward, or forward and backward (c1: dW and db, no dX; c2:
dW, db and dX). Threads from OMP_NUM_THREADS. Each repetition runs the pass for about
MIN_TIME seconds after a warm-up; prints one JSON line per row: the median seconds per pass and
GFLOP/s counted as bench_layers counts them (products x 2·B·Cout·H·W·Cin·9).
  OMP_NUM_THREADS=1 python3 bench/layers/conv_pytorch.py [REPS=5] [MIN_TIME=0.5]"""
import json, os, statistics, sys, time

# glibc hands a freed tensor of 3-7 MB back to the kernel (munmap, trim) and faults it in again
# on the next pass, the most of a pass here; keep freed memory, as a training loop's steady state.
if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ.update(MALLOC_MMAP_THRESHOLD_=str(32 << 20), MALLOC_TRIM_THRESHOLD_=str(1 << 30))
    os.execv(sys.executable, [sys.executable] + sys.argv)
import torch  # noqa: E402

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
MIN_TIME = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
B = 64
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
assert torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
torch.manual_seed(2)

for name, C, H, Cout, dx in (("c1_1x28x28_to_32", 1, 28, 32, False), ("c2_32x14x14_to_64", 32, 14, 64, True)):
    x = torch.empty(B, C, H, H).uniform_(-1, 1).requires_grad_(dx)
    w = torch.empty(Cout, C, 3, 3).uniform_(-1, 1).requires_grad_()
    b = torch.empty(Cout).uniform_(-1, 1).requires_grad_()
    dy = torch.empty(B, Cout, H, H).uniform_(-1, 1)

    def fwd():
        with torch.no_grad():  # inference: no graph kept, as bench_layers' forward keeps none
            torch.nn.functional.conv2d(x, w, b, padding=1)

    def fwd_bwd():
        x.grad = w.grad = b.grad = None  # gradients overwritten, not accumulated
        torch.nn.functional.conv2d(x, w, b, padding=1).backward(dy)

    for pas, fn, products in (("fwd", fwd, 1), ("fwd+bwd", fwd_bwd, 3 if dx else 2)):
        for _ in range(3):  # warm-up: oneDNN's primitives made, the memory faulted in
            fn()
        t0 = time.perf_counter()
        fn()
        iters = max(1, int(MIN_TIME / (time.perf_counter() - t0)))
        times = []
        for _ in range(REPS):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            times.append((time.perf_counter() - t0) / iters)
        s = statistics.median(times)
        flops = products * 2.0 * B * Cout * H * H * C * 9
        print(json.dumps({"name": f"conv/{name}/{pas}/pytorch", "real_time": s, "time_unit": "s",
                          "GFLOPS": flops / s * 1e-9, "threads": torch.get_num_threads()}), flush=True)
