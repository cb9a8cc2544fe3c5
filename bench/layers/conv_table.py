"""The table of bench/conv_vs_pytorch.sh from its CSV: per conv row, pass and thread count, the
median GFLOP/s over the rounds of hddp (the direct convolution Conv2d runs in float), im2col over
hddp's GEMM and over OpenBLAS, and PyTorch, and hddp over PyTorch.
  python3 bench/layers/conv_table.py CSV [COMMAND]"""
import csv, statistics, sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
runs = defaultdict(list)
for r in rows:
    runs[r["row"], r["pass"], int(r["threads"]), r["impl"]].append(float(r["gflops"]))
med = {k: statistics.median(v) for k, v in runs.items()}
rounds = max(int(r["round"]) for r in rows)
print(f"CPU: {rows[0]['cpu']}; one Conv2d, batch 64, float32, 3x3, pad 1; GFLOP/s, median of {rounds} round(s)\n")
print("| conv | pass | threads | hddp (direct, NHWC) | im2col + hddp GEMM | im2col + OpenBLAS | PyTorch (oneDNN) | hddp / PyTorch |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for row, pas, t in sorted({k[:3] for k in med}):
    h, i, o, p = (med[row, pas, t, impl] for impl in ("hddp", "im2col", "openblas", "pytorch"))
    print(f"| {row} | {pas} | {t} | {h:.1f} | {i:.1f} | {o:.1f} | {p:.1f} | {h / p:.2f} |")
print("\nhddp: build/bench/bench_layers' direct convolution (kernels/conv.h) on channels-last"
      " activations, as Conv2d runs inside a model; im2col: core/conv.h's im2col convolution over hddp's"
      " GEMM and over OpenBLAS (NCHW); PyTorch:"
      " torch.nn.functional.conv2d with oneDNN (bench/layers/conv_pytorch.py, NCHW). FLOPs per pass, as"
      " bench_layers counts them: the products it runs (forward 1; forward+backward 2 for c1, dW and db,"
      " no dX; 3 for c2, with dX), each 2·B·Cout·H·W·Cin·9. OPENBLAS_CORETYPE unset.")
if len(sys.argv) > 2:
    print(f"\nCommand: `{sys.argv[2]}`")
