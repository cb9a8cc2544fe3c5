#!/usr/bin/env python3
"""Figures that can fail: re-derives the GEMM, whole-step, Fashion-MNIST, at-scale and test-suite figures of README.md
and the results files bench/results/<topic>.md from the raw data kept under bench/results/<cpu>/,
and exits 1 naming every claim the data no longer supports.

  1. Each kept table (gemm/gemm_table.md, step_vs_pytorch.md, mnist_vs_pytorch.md) is what its
     generator (bench/gemm_table.py, bench/step/step_table.py, bench/mnist/mnist_table.py) makes
     of the kept raw data (bench_gemm's JSON, the CSVs), byte for byte.
  2. Every row of those tables appears verbatim in the results file that quotes it.
  3. Each number quoted in README.md's benchmark lines and the results files (CLAIMS below) is
     in the text and equals the value recomputed from the CSV, rounded as quoted.
  4. The index bench/RESULTS.md: every results file has its line, and each line's headline
     figures, CPU family and model and command are in the file it names.

Usage: python3 bench/check_claims.py [REPO_ROOT | --help]    (the ctest entry test_check_claims runs it)
"""
import csv
import json
import os
import re
import statistics
import subprocess
import sys

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(ROOT, "bench", "results", "intel-xeon-processor")
AMD = os.path.join(ROOT, "bench", "results", "amd-epyc")
# The results files, one per benchmark family (bench/RESULTS.md is their index).
STEP_MD, MNIST_MD, GEMM_MD, BF16_MD, LAYERS_MD, LINK_MD, SCALING_MD, SUITE_MD, AT_SCALE_MD = (
    f"bench/results/{n}.md" for n in ("step", "mnist", "gemm", "bf16", "layers", "link", "scaling", "suite", "at_scale"))
failures = []
checks = 0


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def regenerate(script, csv_path, md_path, argv_from_md):
    """Runs the generator on the CSV with the arguments the kept table names; returns its text."""
    return subprocess.run([sys.executable, os.path.join(ROOT, script), csv_path, *argv_from_md],
                          capture_output=True, text=True, check=True).stdout


def check_table(name, script, args_of, doc, folder=RESULTS):
    global checks
    csv_path, md_path = os.path.join(folder, name + ".csv"), os.path.join(folder, name + ".md")
    kept = open(md_path).read()
    checks += 1
    if regenerate(script, csv_path, md_path, args_of(kept)) != kept:
        failures.append(f"{md_path}: not what {script} makes of {name}.csv (re-run it, or the CSV changed)")
    checks += 1
    results_md = read(doc)
    missing = [l for l in kept.splitlines() if l.startswith("| ") and l[2].isdigit() and l not in results_md]
    if missing:
        failures.append(f"{doc} lacks {len(missing)} row(s) of {name}.md, the first: {missing[0]}")


def step_args(md):
    first, note = md.splitlines()[0], md.splitlines()[1]
    cpu = first[len("CPU: "):first.index("; batch ")]
    batch = first.split("; batch ")[1].split(" ")[0]
    reps = first.split("median of ")[1].split(" ")[0]
    return [cpu, batch, reps, note]


def fashion_args(md, model):
    """The arguments of bench/mnist/mnist_table.py (model "MLP") or cnn_table.py ("CNN") that
    the kept table's first two lines name."""
    first, note = md.splitlines()[0], md.splitlines()[1]
    cpu = first[len("CPU: "):first.index(f"; {model} ")]
    batch = first.split("batch ")[1].split(" ")[0]
    epochs = first.split("per rank, ")[1].split(" ")[0]
    reps = first.split("median of ")[1].split(" ")[0]
    if model == "CNN":
        return [cpu, note, epochs, batch, reps]
    return [cpu, note, epochs, batch, first.split("784-")[1].split("-")[0], reps]


def check_gemm_table(gdir):
    """gdir/gemm_table.md is what bench/gemm_table.py makes of the kept bench_gemm JSON (in the
    order of gdir/runs.txt), and its rows are in bench/results/gemm.md."""
    global checks
    kept = open(os.path.join(gdir, "gemm_table.md")).read()
    runs = [os.path.join(gdir, f) for f in open(os.path.join(gdir, "runs.txt")).read().split()]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gemm_table.py"), *runs,
                          "--csv", os.path.join(gdir, ".check.csv")], capture_output=True, text=True, check=True).stdout
    os.remove(os.path.join(gdir, ".check.csv"))
    checks += 1
    if out != kept:
        failures.append(f"{gdir}/gemm_table.md: not what bench/gemm_table.py makes of the JSON in runs.txt")
    checks += 1
    results_md = read(GEMM_MD)
    missing = [l for l in kept.splitlines() if l.startswith("| ") and l[2] in "sd" and l not in results_md]
    if missing:
        failures.append(f"{GEMM_MD} lacks {len(missing)} row(s) of gemm_table.md, the first: {missing[0]}")


def check_at_scale():
    """at_scale/comm.md (the communication model against the reducer) and at_scale/sim/summary.md
    (the simulated tables) are what bench/at_scale/tables.py makes of the kept CSVs, and their
    rows are in bench/results/at_scale.md."""
    global checks
    adir = os.path.join(AMD, "at_scale")
    for kind, src, md in (("comm", adir, "comm.md"), ("summary", os.path.join(adir, "sim"), os.path.join("sim", "summary.md"))):
        kept = open(os.path.join(adir, md)).read()
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "at_scale", "tables.py"), kind, src],
                             capture_output=True, text=True, check=True).stdout
        checks += 1
        if out != kept:
            failures.append(f"{adir}/{md}: not what bench/at_scale/tables.py {kind} makes of the kept CSVs")
        checks += 1
        missing = [l for l in kept.splitlines() if l.startswith("| ") and l[2].isalnum() and l not in read(AT_SCALE_MD)]
        if missing:
            failures.append(f"{AT_SCALE_MD} lacks {len(missing)} row(s) of {md}, the first: {missing[0]}")


check_gemm_table(os.path.join(RESULTS, "gemm"))
check_gemm_table(os.path.join(AMD, "gemm_conv"))  # the CNN's products
check_at_scale()
check_table("step_vs_pytorch", "bench/step/step_table.py", step_args, STEP_MD)
check_table("mnist_vs_pytorch", "bench/mnist/mnist_table.py", lambda md: fashion_args(md, "MLP"), MNIST_MD)
check_table("mnist_cnn_vs_pytorch", "bench/mnist/cnn_table.py", lambda md: fashion_args(md, "CNN"), MNIST_MD, AMD)

# The medians the README quotes, from the raw rows.
step = list(csv.DictReader(open(os.path.join(RESULTS, "step_vs_pytorch.csv"))))
mnist = list(csv.DictReader(open(os.path.join(RESULTS, "mnist_vs_pytorch.csv"))))


def step_median(w, p, t, impl):
    return statistics.median(float(r["step_s"]) for r in step
                             if (r["width"], r["ranks"], r["threads"], r["impl"]) == (str(w), str(p), str(t), impl))


def speedup(w, p=1, t=1):
    return step_median(w, p, t, "pytorch") / step_median(w, p, t, "hddp")


def limit_ratio(w, p=1, t=1):
    return step_median(w, p, t, "hddp") / step_median(w, p, t, "gemm_limit")


def mnist_epoch(p, impl):
    return statistics.mean(float(r["train_s"]) for r in mnist if r["ranks"] == str(p) and r["impl"] == impl)


def mnist_rss(p, impl):
    return max(float(r["rss_mib"]) for r in mnist if r["ranks"] == str(p) and r["impl"] == impl)


gemm = list(csv.DictReader(open(os.path.join(RESULTS, "gemm", "gemm_table.csv"))))
gemm_conv = list(csv.DictReader(open(os.path.join(AMD, "gemm_conv", "gemm_table.csv"))))


def gemm_vs_best(shapes, threads, table=gemm):
    """hddp / best anchor over the shapes (regexes on 's/NN/1024x1024x1024'-style names)."""
    return [float(r["note"].split(" ")[0]) for r in table
            if r["column"] == "hddp / best anchor" and r["threads"] == str(threads)
            and any(re.fullmatch(p, r["shape"]) for p in shapes)]


def gemm_peak_pct(shape, threads):
    return next(float(r["peak_pct"]) for r in gemm
                if (r["shape"], r["threads"], r["column"]) == (shape, str(threads), "hddp"))


BIG = [r"s/(NN|NT|TN)/1024x1024x1024", r"s/NN/2048x2048x2048", r"s/(NN|NT|TN)/256x(1024x1024|4096x4096)"]
TINY = [r"s/(NN|NT|TN)/(32x20x1|32x1x20)"]
# (file, text that must appear, value from the data, the value the text states, tolerance)
CLAIMS = [
    ("README.md", "sgemm 0.93-1.02x at 1024³-2048³", min(gemm_vs_best(BIG, 1)), 0.93, 0.005),
    ("README.md", "sgemm 0.93-1.02x at 1024³-2048³", max(gemm_vs_best(BIG, 1)), 1.02, 0.005),
    ("README.md", "NN/NT/TN on 1 thread, 0.95-1.12x on 2", min(gemm_vs_best(BIG, 2)), 0.95, 0.005),
    ("README.md", "NN/NT/TN on 1 thread, 0.95-1.12x on 2", max(gemm_vs_best(BIG, 2)), 1.12, 0.005),
    ("README.md", "85 % of the\n  FMA peak at 2048³ on 1 thread", gemm_peak_pct("s/NN/2048x2048x2048", 1), 85, 0.5),
    ("README.md", "dgemm 0.98-1.03x", min(gemm_vs_best([r"d/NN/.*"], 1) + gemm_vs_best([r"d/NN/.*"], 2)), 0.98, 0.005),
    ("README.md", "dgemm 0.98-1.03x", max(gemm_vs_best([r"d/NN/.*"], 1) + gemm_vs_best([r"d/NN/.*"], 2)), 1.03, 0.005),
    ("README.md", "tiny products 1.10-2.87x", min(gemm_vs_best(TINY, 1) + gemm_vs_best(TINY, 2)), 1.10, 0.005),
    ("README.md", "tiny products 1.10-2.87x", max(gemm_vs_best(TINY, 1) + gemm_vs_best(TINY, 2)), 2.87, 0.005),
    ("README.md", "(32,20,20) 0.53-0.86x", min(gemm_vs_best([r"s/../32x20x20"], 1) + gemm_vs_best([r"s/../32x20x20"], 2)), 0.53, 0.005),
    ("README.md", "(32,20,20) 0.53-0.86x", max(gemm_vs_best([r"s/../32x20x20"], 1) + gemm_vs_best([r"s/../32x20x20"], 2)), 0.86, 0.005),
    (GEMM_MD, "1 thread: 0.93-1.02x", min(gemm_vs_best(BIG, 1)), 0.93, 0.005),
    (GEMM_MD, "1.08-4.95x\non 1 thread", min(gemm_vs_best([".*"], 1, gemm_conv)), 1.08, 0.005),
    (GEMM_MD, "1.08-4.95x\non 1 thread", max(gemm_vs_best([".*"], 1, gemm_conv)), 4.95, 0.005),
    (GEMM_MD, "1.12-6.32x on 2", min(gemm_vs_best([".*"], 2, gemm_conv)), 1.12, 0.005),
    (GEMM_MD, "1.12-6.32x on 2", max(gemm_vs_best([".*"], 2, gemm_conv)), 6.32, 0.005),
    (GEMM_MD, "2 threads 0.95-1.12x", max(gemm_vs_best(BIG, 2)), 1.12, 0.005),
    (GEMM_MD, "met**, 85 % (149.6 of 175.2 GFLOP/s)", gemm_peak_pct("s/NN/2048x2048x2048", 1), 85, 0.5),
    ("README.md", "2.2x at W = 256", speedup(256), 2.2, 0.05),
    ("README.md", "1.48x at W = 1024", speedup(1024), 1.48, 0.005),
    ("README.md", "1.54x at 4096 on 1 rank", speedup(4096), 1.54, 0.005),
    ("README.md", "1.6-3.5x on 2 ranks", min(speedup(w, 2) for w in (256, 1024, 4096)), 1.6, 0.05),
    ("README.md", "1.6-3.5x on 2 ranks", max(speedup(w, 2) for w in (256, 1024, 4096)), 3.5, 0.05),
    ("README.md", "1.11-1.23x of its GEMM-bound limit", min(limit_ratio(w) for w in (256, 1024, 4096)), 1.11, 0.005),
    ("README.md", "1.11-1.23x of its GEMM-bound limit", max(limit_ratio(w) for w in (256, 1024, 4096)), 1.23, 0.005),
    ("README.md", "1.1 s per epoch on 2 ranks", mnist_epoch(2, "hddp"), 1.1, 0.05),
    ("README.md", "3.5x\n  PyTorch DDP", mnist_epoch(2, "pytorch") / mnist_epoch(2, "hddp"), 3.5, 0.05),
    ("README.md", "(1.9x on 1 rank)", mnist_epoch(1, "pytorch") / mnist_epoch(1, "hddp"), 1.9, 0.05),
    ("README.md", "3.6-4.4x less memory", mnist_rss(2, "pytorch") / mnist_rss(2, "hddp"), 3.6, 0.05),
    ("README.md", "3.6-4.4x less memory", mnist_rss(1, "pytorch") / mnist_rss(1, "hddp"), 4.4, 0.05),
]
comm = [r for p in (2, 3) for r in csv.DictReader(open(os.path.join(AMD, "at_scale", f"comm-{p}.csv")))]
CLAIMS += [
    ("README.md", "within 0.93-1.14x on 2 ranks", min(float(r["ratio"]) for r in comm if r["ranks"] == "2"), 0.93, 0.005),
    ("README.md", "within 0.93-1.14x on 2 ranks", max(float(r["ratio"]) for r in comm if r["ranks"] == "2"), 1.14, 0.005),
    ("README.md", "one row of 12 short (1.49x", max(float(r["ratio"]) for r in comm), 1.49, 0.005),
    ("README.md", "one row of 12 short (1.49x", sum(abs(float(r["ratio"]) - 1) > 0.25 for r in comm), 1, 0),
]
# One Conv2d against PyTorch: the kept table's rows in layers.md, its hddp / PyTorch ranges.
conv_md = open(os.path.join(AMD, "conv_vs_pytorch.md")).read()
conv_rows = [l for l in conv_md.splitlines() if l.startswith("| c")]
checks += 1
if any(l not in read(LAYERS_MD) for l in conv_rows):
    failures.append(f"{LAYERS_MD} lacks rows of bench/results/amd-epyc/conv_vs_pytorch.md")
conv_ratio = {t: [float(l.split("|")[8]) for l in conv_rows if l.split("|")[3].strip() == t] for t in ("1", "2")}
CLAIMS += [
    (LAYERS_MD, "1.03-1.55x oneDNN's on 1 thread and 0.79-1.35x on 2", min(conv_ratio["1"]), 1.03, 0.005),
    (LAYERS_MD, "1.03-1.55x oneDNN's on 1 thread and 0.79-1.35x on 2", max(conv_ratio["1"]), 1.55, 0.005),
    (LAYERS_MD, "1.03-1.55x oneDNN's on 1 thread and 0.79-1.35x on 2", min(conv_ratio["2"]), 0.79, 0.005),
    (LAYERS_MD, "1.03-1.55x oneDNN's on 1 thread and 0.79-1.35x on 2", max(conv_ratio["2"]), 1.35, 0.005),
    ("README.md", "1.03-1.55x oneDNN's per layer on 1 thread", min(conv_ratio["1"]), 1.03, 0.005),
    ("README.md", "1.03-1.55x oneDNN's per layer on 1 thread", max(conv_ratio["1"]), 1.55, 0.005),
]

# The CNN step and its products (bench_layers JSON, 1 and 2 threads): medians and % of the probe.
def layers_median(threads, name):
    f = os.path.join(AMD, "layers", "cnn_step_1thread.json" if threads == 1 else "cnn_step_2threads.json")
    for b in json.load(open(f))["benchmarks"]:
        if b.get("aggregate_name") == "median" and b["name"] == name + "/real_time_median":
            return b
    raise KeyError(name)


step1, step2 = layers_median(1, "step/cnn/hddp"), layers_median(2, "step/cnn/hddp")
prod1 = layers_median(1, "step/cnn/products")
CLAIMS += [
    (LAYERS_MD, "The step at 62.4 % of the probe on one thread", step1["peak_pct"], 62.4, 0.05),
    (LAYERS_MD, "The step within 1.12x of its products on one thread", step1["real_time"] / prod1["real_time"], 1.12, 0.005),
    (LAYERS_MD, "2 threads 1.75x 1 thread on the step", step1["real_time"] / step2["real_time"], 1.75, 0.005),
    (LAYERS_MD, "c2 forward and backward at 78.5 % of the probe",
     layers_median(1, "conv/c2_32x14x14_to_64/fwd+bwd/hddp")["peak_pct"], 78.5, 0.05),
    (LAYERS_MD, "c1 at 25.1 %: short of 40 %", layers_median(1, "conv/c1_1x28x28_to_32/fwd+bwd/hddp")["peak_pct"], 25.1, 0.05),
    ("README.md", "runs the CNN step at 62 % of the core's FMA peak", step1["peak_pct"], 62, 0.5),
]

# The CNN against PyTorch: per-epoch and per-run ratios and memory from the raw rows (3 rounds,
# the medians cnn_table.py takes: each run's mean epoch, each run's wall-clock seconds).
cnn = list(csv.DictReader(open(os.path.join(AMD, "mnist_cnn_vs_pytorch.csv"))))


def cnn_runs(p, t, impl):
    runs = {}
    for r in cnn:
        if (r["ranks"], r["threads"], r["impl"]) == (str(p), str(t), impl):
            runs.setdefault(r["rep"], []).append(r)
    return list(runs.values())


def cnn_ratio(p, t, key):
    def med(impl):
        if key == "run_s":
            return statistics.median(float(run[0]["run_s"]) for run in cnn_runs(p, t, impl))
        return statistics.median(statistics.mean(float(r["train_s"]) for r in run) for run in cnn_runs(p, t, impl))
    return med("pytorch") / med("hddp")


def cnn_warm(p, t, impl):
    return statistics.mean(float(r["train_s"]) for run in cnn_runs(p, t, impl) for r in run if r["epoch"] != "1")


CLAIMS += [
    (MNIST_MD, "met at both layouts, 3.43x and 3.15x per epoch", cnn_ratio(2, 1, "train_s"), 3.43, 0.005),
    (MNIST_MD, "met at both layouts, 3.43x and 3.15x per epoch", cnn_ratio(1, 2, "train_s"), 3.15, 0.005),
    (MNIST_MD, "4.81x and 4.74x per\n  run", cnn_ratio(2, 1, "run_s"), 4.81, 0.005),
    (MNIST_MD, "4.81x and 4.74x per\n  run", cnn_ratio(1, 2, "run_s"), 4.74, 0.005),
    (MNIST_MD, "2.49x ahead at 2 x 1 and 2.29x at 1 x 2",
     cnn_warm(2, 1, "pytorch") / cnn_warm(2, 1, "hddp"), 2.49, 0.005),
    (MNIST_MD, "2.49x ahead at 2 x 1 and 2.29x at 1 x 2",
     cnn_warm(1, 2, "pytorch") / cnn_warm(1, 2, "hddp"), 2.29, 0.005),
    ("README.md", "3.43x PyTorch DDP with oneDNN per epoch", cnn_ratio(2, 1, "train_s"), 3.43, 0.005),
    ("README.md", "(2.49x once PyTorch is\n  warm)", cnn_warm(2, 1, "pytorch") / cnn_warm(2, 1, "hddp"), 2.49, 0.005),
    ("README.md", "4.81x per run", cnn_ratio(2, 1, "run_s"), 4.81, 0.005),
    ("README.md", "3.15x on 1 rank x 2 threads", cnn_ratio(1, 2, "train_s"), 3.15, 0.005),
    ("README.md", "run 1.08-6.32x the best of OpenBLAS", min(gemm_vs_best([".*"], 1, gemm_conv) + gemm_vs_best([".*"], 2, gemm_conv)), 1.08, 0.005),
    ("README.md", "run 1.08-6.32x the best of OpenBLAS", max(gemm_vs_best([".*"], 1, gemm_conv) + gemm_vs_best([".*"], 2, gemm_conv)), 6.32, 0.005),
]

# Thread and rank scaling: the kept table is what bench/scaling/collect.py --md makes of
# scaling.csv, its rows are in scaling.md, and each speed-up scaling.md quotes is the CSV's.
sdir = os.path.join(AMD, "scaling")
checks += 1
kept = open(os.path.join(sdir, "scaling.md")).read()
if subprocess.run([sys.executable, os.path.join(ROOT, "bench", "scaling", "collect.py"), "--md",
                   os.path.join(sdir, "scaling.csv")], capture_output=True, text=True, check=True).stdout != kept:
    failures.append(f"{sdir}/scaling.md: not what bench/scaling/collect.py --md makes of scaling.csv")
checks += 1
if any(l not in read(SCALING_MD) for l in kept.splitlines() if l.startswith("| ") and "x" in l.split("|")[2]):
    failures.append(f"{SCALING_MD} lacks rows of bench/results/amd-epyc/scaling/scaling.md")
sp = {(r["workload"], r["ranks"], r["threads"]): float(r["speedup"]) for r in csv.DictReader(open(os.path.join(sdir, "scaling.csv")))}
for text, key in (("GEMM: {:.2f}x at 1024^3", ("sgemm_1024", "1", "2")),
                  ("and {:.2f}x at the thin shape on 2 threads", ("sgemm_thin", "1", "2")),
                  ("{:.2f}x on 2 threads alone (bench_layers)", ("mlp_step_bench", "1", "2")),
                  ("{:.2f}x at 1 x 2 against", ("mlp_step", "1", "2")),
                  ("against {:.2f}x at 2 x 1.", ("mlp_step", "2", "1")),
                  ("**Adam: {:.2f}x on 2 threads**", ("adam_16Mi", "1", "2")),
                  ("**tanh: {:.2f}x on 2 threads**", ("tanh_16Mi", "1", "2")),
                  ("MLP step: {:.2f}x at 1 x 2", ("mnist_step", "1", "2"))):
    checks += 1
    if text.format(sp[key]) not in read(SCALING_MD):
        failures.append(f"{SCALING_MD}: '{text.format(sp[key])}' (from scaling.csv) is not in the text")
for text, key in (("sgemm {:.2f}x on 2 threads", ("sgemm_1024", "1", "2")),
                  ("MLP step {:.2f}x at 1 rank x 2 threads", ("mlp_step", "1", "2")),
                  ("Adam {:.2f}x;", ("adam_16Mi", "1", "2"))):
    checks += 1
    if text.format(sp[key]) not in read("README.md"):
        failures.append(f"README.md: '{text.format(sp[key])}' (from scaling.csv) is not in the text")

# The two commands' wall times (bench/results/amd-epyc/suite/: the logs of the runs).
suite = read("bench/results/amd-epyc/suite/test_sh_after.log")
phases = {m.group(2): int(m.group(1)) for m in re.finditer(r"^== \[(\d+) s\] (.*)$", suite, re.M)}
hog_phases = {m.group(2): int(m.group(1)) for m in re.finditer(r"^== \[(\d+) s\] (.*)$",
             read("bench/results/amd-epyc/suite/test_sh_beside_two_hogs.log"), re.M)}
run_real = re.search(r"^real\s+(\d+)m([\d.]+)s", read("bench/results/amd-epyc/suite/run_sh_after.log"), re.M)
# The suite with the sanitizer pass beside the normal pass (bench/results/intel-xeon-processor/suite/).
now = read("bench/results/intel-xeon-processor/suite/test_sh_fresh_clone.log")
now_phases = {m.group(2): int(m.group(1)) for m in re.finditer(r"^== \[(\d+) s\] (.*)$", now, re.M)}
now_real = re.search(r"^real\s+(\d+)m([\d.]+)s", now, re.M)
again_real = re.search(r"^real\s+(\d+)m([\d.]+)s",
                       read("bench/results/intel-xeon-processor/suite/test_sh_fresh_clone_2.log"), re.M)
now_tests = [int(m.group(1)) for m in re.finditer(r"tests passed, 0 tests failed out of (\d+)$", now, re.M)]
CLAIMS += [
    (SUITE_MD, "second run of the same code, 21 min 24 s", int(again_real.group(1)) * 60 + float(again_real.group(2)),
     1284, 0.5),
    (SUITE_MD, "| 215 -> 942 (727 s) |",
     now_phases["normal pass done (rc 0)"] - now_phases["normal pass: ctest -j 2"], 727, 0),
    (SUITE_MD, "| 609 -> 1163 (554 s) |",
     now_phases["sanitizer pass done (rc 0)"] - now_phases["sanitizer build done, sanitizer pass starts"], 554, 0),
    (SUITE_MD, "**met here, 19 min 23 s**", now_phases["sanitizer pass done (rc 0)"], 1163, 0),
]
hogs_now = read("bench/results/intel-xeon-processor/suite/test_sh_beside_two_hogs.log")
hogs_real = re.search(r"^real\s+(\d+)m([\d.]+)s", hogs_now, re.M)
hogs_tests = [int(m.group(1)) for m in re.finditer(r"tests passed, 0 tests failed out of (\d+)$", hogs_now, re.M)]
CLAIMS += [
    (SUITE_MD, "green, 83 + 66 tests, **30 min 43 s**", sum(hogs_tests), 83 + 66, 0),
]
# The suite with cores counted as the tests use them (2026-12-07): the README quotes these runs.
def suite_run(name):
    text = read(f"bench/results/intel-xeon-processor/suite/test_sh_2026-12-07_{name}.log")
    real = re.search(r"^real\s+(\d+)m([\d.]+)s", text, re.M)
    return ({m.group(2): int(m.group(1)) for m in re.finditer(r"^== \[(\d+) s\] (.*)$", text, re.M)},
            int(real.group(1)) * 60 + float(real.group(2)),
            [int(m.group(1)) for m in re.finditer(r"tests passed, 0 tests failed out of (\d+)$", text, re.M)])
q_phases, q_real, q_tests = suite_run("quiet")
r_phases, r_real, r_tests = suite_run("quiet_rerun")
h_phases, h_real, h_tests = suite_run("beside_two_hogs")
CLAIMS += [
    (SUITE_MD, "| quiet machine (`test_sh_2026-12-07_quiet.log`) | **18 min 21 s** |", q_real, 1101, 0.5),
    (SUITE_MD, "| 213 s | 905 s | 673 s | 1,102 s | 95 + 76, green |", q_phases["sanitizer pass done (rc 0)"], 1102, 0),
    (SUITE_MD, "| again (`test_sh_2026-12-07_quiet_rerun.log`) | 18 min 16 s |", r_real, 1096, 0.5),
    (SUITE_MD, "| 211 s | 919 s | 663 s | 1,096 s |", r_phases["normal pass done (rc 0)"], 919, 0),
    (SUITE_MD, "| 28 min 33 s | 448 s | 1,692 s | 1,060 s | 1,713 s | 95 + 76, green |", sum(h_tests), 95 + 76, 0),
    (SUITE_MD, "| 28 min 33 s | 448 s | 1,692 s | 1,060 s | 1,713 s | 95 + 76, green |", h_real, 1713, 0.5),
]
# The suite with the transformers: the README quotes these runs.
t_phases, t_real, t_tests = suite_run("transformers_quiet")
th_phases, th_real, th_tests = suite_run("transformers_beside_two_hogs")
CLAIMS += [
    ("README.md", "24 min 5 s on an Intel Xeon", t_real, 1445.4, 0.5),
    ("README.md", "build 5.1 min", t_phases["normal pass: ctest -j 2"] / 60, 5.1, 0.05),
    ("README.md", "the normal pass (109 tests)", t_tests[0], 109, 0),
    ("README.md", "the sanitizer pass (89 tests)", t_tests[1], 89, 0),
    ("README.md", "green beside two CPU hogs in 42 min 52 s", th_real, 2572.5, 0.5),
    ("README.md", "green beside two CPU hogs in 42 min 52 s", sum(th_tests), 109 + 89, 0),
    (SUITE_MD, "| **24 min 5 s** | 305 s | 1,143 s | 928 s | 1,445 s | 109 + 89, green |",
     t_phases["sanitizer pass done (rc 0)"], 1445, 0),
    (SUITE_MD, "| **24 min 5 s** | 305 s | 1,143 s | 928 s | 1,445 s | 109 + 89, green |",
     t_phases["normal pass done (rc 0)"], 1143, 0),
    (SUITE_MD, "| **24 min 5 s** | 305 s | 1,143 s | 928 s | 1,445 s | 109 + 89, green |", sum(t_tests), 109 + 89, 0),
    (SUITE_MD, "| 42 min 52 s | 862 s | 2,487 s | 1,772 s | 2,572 s | 109 + 89, green |",
     th_phases["sanitizer pass done (rc 0)"], 2572, 0),
]
CLAIMS += [
    (SUITE_MD, "| 592 s, 55 tests |", phases["sanitizer pass done"] - phases["sanitizer pass"], 592, 0),
    (SUITE_MD, "| 810 s, 72 tests,", phases["normal pass done (rc 0)"] - phases["normal pass: ctest -j 2"], 810, 0),
    (SUITE_MD, "green, 72 + 55 tests, 41 min 7 s (normal pass 1086 s",
     hog_phases["normal pass done (rc 0)"] - hog_phases["normal pass: ctest -j 2"], 1086, 0),
    (SUITE_MD, "sanitizer pass\n1255 s;", hog_phases["sanitizer pass done"] - hog_phases["sanitizer pass"], 1255, 0),
    ("README.md", "`bash scripts/run.sh` 3 min 19 s", int(run_real.group(1)) * 60 + float(run_real.group(2)), 199, 0.5),
]
# bf16 (AMD EPYC, Zen 5: AVX512_BF16, no AMX): the wide MLP step against PyTorch's bf16 autocast.
check_table("step_vs_pytorch_bf16", "bench/step/step_table.py", lambda md: step_args(md) + ["bf16"], BF16_MD, folder=AMD)
step16 = list(csv.DictReader(open(os.path.join(AMD, "step_vs_pytorch_bf16.csv"))))


def step16_ratio(p, t):
    def med(impl):
        return statistics.median(float(r["step_s"]) for r in step16
                                 if (r["ranks"], r["threads"], r["impl"]) == (str(p), str(t), impl))
    return med("pytorch") / med("hddp")


check_table("mnist_cnn_vs_pytorch_bf16", "bench/mnist/cnn_table.py", lambda md: fashion_args(md, "CNN") + ["1.5"],
            BF16_MD, folder=AMD)
cnn16 = list(csv.DictReader(open(os.path.join(AMD, "mnist_cnn_vs_pytorch_bf16.csv"))))
gd = list(csv.DictReader(open(os.path.join(AMD, "bf16", "grad_dtype.csv"))))


def cnn16_ratio(p, t, key):
    def med(impl):
        runs = {}
        for r in cnn16:
            if (r["ranks"], r["threads"], r["impl"]) == (str(p), str(t), impl):
                runs.setdefault(r["rep"], []).append(r)
        if key == "run_s":
            return statistics.median(float(run[0]["run_s"]) for run in runs.values())
        return statistics.median(statistics.mean(float(r["train_s"]) for r in run) for run in runs.values())
    return med("pytorch") / med("hddp")


def last_acc(rows, p, t):
    return 100 * statistics.mean(float(r["test_accuracy"]) for r in rows
                                 if (r["ranks"], r["threads"], r["impl"], r["epoch"]) == (str(p), str(t), "hddp", "3"))


def bf16_layer(name):
    for b in json.load(open(os.path.join(AMD, "bf16", "layers_1thread.json")))["benchmarks"]:
        if b.get("aggregate_name") == "median" and b["name"] == name + "/real_time_median":
            return b["real_time"]
    raise KeyError(name)


def bf16_gemm(name):
    for b in json.load(open(os.path.join(AMD, "bf16", "gemm_bf16_1thread.json")))["benchmarks"]:
        if b.get("aggregate_name") == "median" and b["name"] == name + "/real_time_median":
            return b["GFLOPS"]
    raise KeyError(name)


# The table's square and MLP rows (bf16.md lists these eight).
squares = [bf16_gemm(f"gemm/hddp-bf16/h/{t}/{s}") / bf16_gemm(f"gemm/hddp/s/{t}/{s}")
           for t in ("NN", "NT", "TN") for s in ("1024x1024x1024", "2048x2048x2048", "256x1024x1024") if (t, s) != ("TN", "1024x1024x1024")]
gd_acc = {g: 100 * statistics.mean(float(r["test_accuracy"]) for r in gd if r["grad_dtype"] == g) for g in ("float", "bf16")}
CLAIMS += [
    (BF16_MD, "**2.48x PyTorch's autocast per epoch at 2 x 1 and 2.41x at 1 x 2, 4.30x and 3.87x per run",
     cnn16_ratio(2, 1, "train_s"), 2.48, 0.005),
    (BF16_MD, "**2.48x PyTorch's autocast per epoch at 2 x 1 and 2.41x at 1 x 2, 4.30x and 3.87x per run",
     cnn16_ratio(1, 2, "train_s"), 2.41, 0.005),
    (BF16_MD, "**2.48x PyTorch's autocast per epoch at 2 x 1 and 2.41x at 1 x 2, 4.30x and 3.87x per run",
     cnn16_ratio(2, 1, "run_s"), 4.30, 0.005),
    (BF16_MD, "**2.48x PyTorch's autocast per epoch at 2 x 1 and 2.41x at 1 x 2, 4.30x and 3.87x per run",
     cnn16_ratio(1, 2, "run_s"), 3.87, 0.005),
    (BF16_MD, "88.79 % vs 88.64 % at 2 x 1", last_acc(cnn16, 2, 1), 88.79, 0.005),
    (BF16_MD, "88.79 % vs 88.64 % at 2 x 1", last_acc(cnn, 2, 1), 88.64, 0.005),
    (BF16_MD, "90.18 % vs 90.11 % at 1 x 2", last_acc(cnn16, 1, 2), 90.18, 0.005),
    (BF16_MD, "90.18 % vs 90.11 % at 1 x 2", last_acc(cnn, 1, 2), 90.11, 0.005),
    (BF16_MD, "The CNN step gains 1.17x, the wide MLP step 1.34x",
     bf16_layer("step/cnn/hddp") / bf16_layer("step/cnn/hddp-bf16"), 1.17, 0.005),
    (BF16_MD, "The CNN step gains 1.17x, the wide MLP step 1.34x",
     bf16_layer("step/wide/hddp") / bf16_layer("step/wide/hddp-bf16"), 1.34, 0.005),
    (BF16_MD, "forward runs 1.68x faster on the bf16 micro-kernel",
     bf16_layer("conv/c2_32x14x14_to_64/fwd/hddp") / bf16_layer("conv/c2_32x14x14_to_64/fwd/hddp-bf16"), 1.68, 0.005),
    (BF16_MD, "Square and MLP shapes run 1.68-1.80x the float GEMM", min(squares), 1.68, 0.005),
    (BF16_MD, "Square and MLP shapes run 1.68-1.80x the float GEMM", max(squares), 1.80, 0.005),
    # --grad-dtype bf16: the accuracies as the text rounds them (the text must hold them).
    (BF16_MD, f"test accuracy {gd_acc['bf16']:.2f} % against {gd_acc['float']:.2f} %", 0, 0, 0),
]
CLAIMS += [
    ("README.md", "the wide MLP step\n5.1x PyTorch's bf16 autocast", step16_ratio(1, 1), 5.1, 0.05),
    (BF16_MD, "5.12x PyTorch's bf16 autocast on 1 x 1 and 6.75x on 1 x 2", step16_ratio(1, 1), 5.12, 0.005),
    (BF16_MD, "5.12x PyTorch's bf16 autocast on 1 x 1 and 6.75x on 1 x 2", step16_ratio(1, 2), 6.75, 0.005),
]

# bf16 on the Intel Xeon with AMX (family 6 model 167): the CNN in float and bf16 against PyTorch
# (bench/mnist/cnn_bf16.sh: the training seconds, and the accuracy after 3 epochs of all the
# data), gemm_bf16 against PyTorch's bf16 matmul (bench/gemm/gemm_bf16_vs_pytorch.sh). The kept
# tables are what their generators make of the raw files; their rows are in bf16.md.
B16I = os.path.join(RESULTS, "bf16")


def check_generated(script, raw, md_path, args):
    global checks
    kept = open(md_path).read()
    checks += 2
    out = subprocess.run([sys.executable, os.path.join(ROOT, script), raw, *args], capture_output=True, text=True,
                         check=True).stdout
    if out != kept:
        failures.append(f"{md_path}: not what {script} makes of {os.path.basename(raw)} (re-run it, or the data changed)")
    missing = [l for l in kept.splitlines() if l.startswith("| ") and (l[2].isdigit() or l[2] in "NT") and
               l not in read(BF16_MD)]
    if missing:
        failures.append(f"{BF16_MD} lacks {len(missing)} row(s) of {os.path.basename(md_path)}, the first: {missing[0]}")


def cnn_bf16_args(md):
    line = md.splitlines()[0]
    cpu = line[len("CPU: "):line.index("; hddp's bf16 unit")]
    return [cpu, line[line.index(". ", line.index("unit:")) + 2:]]


for sub in ("", "accuracy"):
    d = os.path.join(B16I, sub)
    check_generated("bench/mnist/cnn_bf16_table.py", os.path.join(d, "cnn_bf16.csv"), os.path.join(d, "cnn_bf16.md"),
                    cnn_bf16_args(open(os.path.join(d, "cnn_bf16.md")).read()))
gline = open(os.path.join(B16I, "gemm_bf16_vs_pytorch.md")).read().splitlines()[0]
gcpu = gline[len("CPU: "):gline.index(". ")]
check_generated("bench/gemm/gemm_bf16_table.py", os.path.join(B16I, "gemm_bf16_vs_pytorch.jsonl"),
                os.path.join(B16I, "gemm_bf16_vs_pytorch.md"),
                [gcpu, gline[len("CPU: ") + len(gcpu) + 2:gline.index(". One thread")]])
cb16 = list(csv.DictReader(open(os.path.join(B16I, "cnn_bf16.csv"))))


def cnn_epoch(rows, layout, impl, prec):
    runs = {}
    for r in rows:
        if (r["ranks"], r["threads"], r["impl"], r["precision"]) == (*layout, impl, prec):
            runs.setdefault(r["rep"], []).append(float(r["train_s"]))
    return statistics.median(statistics.mean(v) for v in runs.values())


cb_layouts = [("1", "1"), ("2", "1"), ("1", "2")]
bf_vs_float = [cnn_epoch(cb16, l, "hddp", "float") / cnn_epoch(cb16, l, "hddp", "bf16") for l in cb_layouts]
bf_vs_torch = [cnn_epoch(cb16, l, "pytorch", "bf16") / cnn_epoch(cb16, l, "hddp", "bf16") for l in cb_layouts]
f_vs_torch = [cnn_epoch(cb16, l, "pytorch", "float") / cnn_epoch(cb16, l, "hddp", "float") for l in cb_layouts]
acc16 = list(csv.DictReader(open(os.path.join(B16I, "accuracy", "cnn_bf16.csv"))))


def final_acc(prec):
    return 100 * statistics.mean(float(r["test_accuracy"]) for r in acc16
                                 if (r["impl"], r["precision"], r["epoch"]) == ("hddp", prec, "3"))


def layer16(name):
    for b in json.load(open(os.path.join(B16I, "layers_1thread.json")))["benchmarks"]:
        if b.get("aggregate_name") == "median" and b["name"] == name + "/real_time_median":
            return b["real_time"]
    raise KeyError(name)


c2 = "conv/c2_32x14x14_to_64/"
CLAIMS += [
    ("README.md", f"{min(bf_vs_float):.2f}-{max(bf_vs_float):.2f}x hddp's float", 0, 0, 0),
    ("README.md", f"{min(bf_vs_torch):.2f}-{max(bf_vs_torch):.2f}x PyTorch's bf16\nautocast", 0, 0, 0),
    (BF16_MD, f"never slower than float: met, {min(bf_vs_float):.2f}-{max(bf_vs_float):.2f}x at every layout", 0, 0, 0),
    (BF16_MD, f"bf16 >= 2x PyTorch's bf16 autocast: met, {min(bf_vs_torch):.2f}-{max(bf_vs_torch):.2f}x.", 0, 0, 0),
    (BF16_MD, f"met at 1 x 1 ({f_vs_torch[0]:.2f}x) and 1 x 2 ({f_vs_torch[2]:.2f}x), short at 2 x 1 ({f_vs_torch[1]:.2f}x)",
     0, 0, 0),
    (BF16_MD, f"bf16 >= 2x hddp float: short ({min(bf_vs_float):.2f}-{max(bf_vs_float):.2f}x)", 0, 0, 0),
    (BF16_MD, f"hddp in bf16 ends {final_acc('float') - final_acc('bf16'):.2f} point below hddp in float", 0, 0, 0),
    (BF16_MD, "On AMX its forward runs 3.28x faster, forward and backward 2.15x",
     layer16(c2 + "fwd/hddp") / layer16(c2 + "fwd/hddp-bf16"), 3.28, 0.005),
    (BF16_MD, "On AMX its forward runs 3.28x faster, forward and backward 2.15x",
     layer16(c2 + "fwd+bwd/hddp") / layer16(c2 + "fwd+bwd/hddp-bf16"), 2.15, 0.005),
    (BF16_MD, "the second convolution is 1.39x slower than float here",
     layer16(c2 + "fwd+bwd/hddp-bf16-avx512bf16") / layer16(c2 + "fwd+bwd/hddp"), 1.39, 0.005),
    (BF16_MD, "| step/cnn (batch 64) | 13.335 | - | - | 9.081 | 1.47x |", layer16("step/cnn/hddp") / 1e6, 13.335, 0.0005),
    (BF16_MD, "| step/cnn (batch 64) | 13.335 | - | - | 9.081 | 1.47x |", layer16("step/cnn/hddp-bf16") / 1e6, 9.081, 0.0005),
]

# Over a network link (bench/link/link_table.sh): the kept table is what link_table.py makes of
# the CSV, its rows are in link.md, and the figures README and link.md quote are the CSV's.
ldir = os.path.join(RESULTS, "link")
lmd = open(os.path.join(ldir, "link_steps.md")).read()
lines = lmd.splitlines()
lcpu = lines[0][len("CPU: "):lines[0].index(". 2 ranks")]
lnote = lines[5][lines[5].index("exposed = hddp default - compute alone. ") + len("exposed = hddp default - compute alone. "):]
checks += 1
if regenerate("bench/link/link_table.py", os.path.join(ldir, "link_steps.csv"), None, [lcpu, lnote]) != lmd:
    failures.append(f"{ldir}/link_steps.md: not what bench/link/link_table.py makes of link_steps.csv")
checks += 1
lmissing = [l for l in lines if l.startswith("| ") and not l.startswith("| link") and l not in read(LINK_MD)]
if lmissing:
    failures.append(f"{LINK_MD} lacks {len(lmissing)} row(s) of link/link_steps.md, the first: {lmissing[0]}")
lj = json.loads(subprocess.run([sys.executable, os.path.join(ROOT, "bench", "link", "link_table.py"),
                                os.path.join(ldir, "link_steps.csv"), "--json"], capture_output=True, text=True, check=True).stdout)
lrow = {(m, r["rate"]): r for m in lj for r in lj[m]["rows"]}
fast = ("none", "25gbit", "10gbit", "3gbit")
slow_ratio = [lrow[(m, "1gbit")]["default_vs_comm"] for m in ("cnn", "mlp")]
gd = list(csv.DictReader(open(os.path.join(RESULTS, "bf16", "grad_dtype.csv"))))
gacc = {g: 100 * statistics.mean(float(r["test_accuracy"]) for r in gd if r["grad_dtype"] == g) for g in ("float", "bf16")}
CLAIMS += [
    ("README.md", "2.13-2.26x PyTorch DDP at its best bucket cap", min(lrow[("cnn", r)]["vs_torch"] for r in fast), 2.13, 0.005),
    ("README.md", "2.13-2.26x PyTorch DDP at its best bucket cap", max(lrow[("cnn", r)]["vs_torch"] for r in fast), 2.26, 0.005),
    ("README.md", "1.52-1.61 s per\nepoch of 100 steps", min(lrow[("cnn", r)]["default"] for r in fast), 1.52, 0.005),
    ("README.md", "1.52-1.61 s per\nepoch of 100 steps", max(lrow[("cnn", r)]["default"] for r in fast), 1.61, 0.005),
    ("README.md", "against 1.39 s with no communication", lj["cnn"]["compute"], 1.39, 0.005),
    ("README.md", "at 1 Gbit/s 1.88 s (1.94x PyTorch)", lrow[("cnn", "1gbit")]["default"], 1.88, 0.005),
    ("README.md", "at 1 Gbit/s 1.88 s (1.94x PyTorch)", lrow[("cnn", "1gbit")]["vs_torch"], 1.94, 0.005),
    ("README.md", "where 25 MiB\nbuckets took 2.74 s", lrow[("cnn", "1gbit")]["variants"]["cap25"], 2.74, 0.005),
    ("README.md", "(1.63 s at 1 Gbit/s)", lrow[("cnn", "1gbit")]["bf16"], 1.63, 0.005),
    ("README.md", "the MLP (1024 wide) 1.59-1.69x", min(lrow[("mlp", r)]["vs_torch"] for r in fast[:3]), 1.59, 0.005),
    ("README.md", "the MLP (1024 wide) 1.59-1.69x", max(lrow[("mlp", r)]["vs_torch"] for r in fast[:3]), 1.69, 0.005),
    ("README.md", "at 1 Gbit/s the step is 1.28-1.33x the bytes' own time", min(slow_ratio), 1.28, 0.005),
    ("README.md", "at 1 Gbit/s the step is 1.28-1.33x the bytes' own time", max(slow_ratio), 1.33, 0.005),
    ("README.md", "the MLP at 3 Gbit/s 1.67x", lrow[("mlp", "3gbit")]["default_vs_comm"], 1.67, 0.005),
    (LINK_MD, "test accuracy 88.60 % against\n88.87 %", gacc["bf16"], 88.60, 0.005),
    (LINK_MD, "test accuracy 88.60 % against\n88.87 %", gacc["float"], 88.87, 0.005),
    (LINK_MD, "1 rank: hddp 0.91 s, PyTorch 1.50 s: 1.65x", lj["mlp"]["compute_torch"] / lj["mlp"]["compute"], 1.65, 0.005),
]


# The GPT (bench/gpt/) on the Intel Xeon: the step against PyTorch DDP (gpt_step.sh) and real
# runs side by side (gpt_loss.sh). The kept tables are what gpt_table.py makes of the raw CSVs,
# their rows are in gpt.md, and gpt.md's goal lines are the tables' own.
GPT = os.path.join(RESULTS, "gpt")
GPT_MD = "bench/results/gpt.md"


def check_gpt_table(mode, name):
    global checks
    md_path = os.path.join(GPT, name + ".md")
    kept = open(md_path).read()
    first = kept.splitlines()[0]
    cpu = first[first.index("PyTorch"):]
    cpu = cpu[cpu.index("(") + 1:-1]
    checks += 1
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpt/gpt_table.py"), mode,
                          os.path.join(GPT, name + ".csv"), cpu], capture_output=True, text=True, check=True).stdout
    if out != kept:
        failures.append(f"{md_path}: not what bench/gpt/gpt_table.py makes of {name}.csv (re-run it, or the data changed)")
    gpt_md = read(GPT_MD)
    for line in kept.splitlines():
        if line.startswith("| ") and not line.startswith("| config") and not line.startswith("| step |") or \
           line.startswith("Goal"):
            checks += 1
            if line not in gpt_md:
                failures.append(f"{GPT_MD} lacks this line of {name}.md: {line}")


check_gpt_table("step", "gpt_step")
check_gpt_table("loss", "gpt_loss")
# bench_gpt's rows (one JSON per thread count) and the table gpt_table.py makes of them.
checks += 1
lkept = open(os.path.join(GPT, "gpt_layers.md")).read()
lfirst = lkept.splitlines()[0]
lout = subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpt/gpt_table.py"), "layers",
                       os.path.join(GPT, "bench_gpt_1t.json"), os.path.join(GPT, "bench_gpt_2t.json"),
                       lfirst[lfirst.index("probe (") + len("probe ("):-1]], capture_output=True, text=True, check=True).stdout
if lout != lkept:
    failures.append(f"{GPT}/gpt_layers.md: not what bench/gpt/gpt_table.py makes of bench_gpt_1t.json and bench_gpt_2t.json")
for line in lkept.splitlines():
    if line.startswith("| gpt/"):
        checks += 1
        if line not in read(GPT_MD):
            failures.append(f"{GPT_MD} lacks this line of gpt_layers.md: {line}")


# The index (bench/RESULTS.md): a line per results file; each line's quoted headline figures, the
# CPU families and models and the command are in the file it names (whitespace and bold aside).
def plain(text):
    return re.sub(r"\s+", " ", text.replace("**", ""))


index = read("bench/RESULTS.md")
listed = set()
for row in index.splitlines():
    m = re.match(r"\| \[([\w.]+)\]\(results/([\w.]+)\) \|(.*)$", row)
    if not m:
        continue
    name, cells = m.group(2), [c.strip() for c in m.group(3).split(" | ")]
    listed.add(name)
    checks += 1
    if m.group(1) != name or len(cells) != 4 or not os.path.exists(os.path.join(ROOT, "bench", "results", name)):
        failures.append(f"bench/RESULTS.md: the line of {name} does not name an existing file with its four cells")
        continue
    headline, cpu, command = cells[1], cells[2], cells[3].rstrip(" |")
    topic = plain(read(f"bench/results/{name}"))
    quoted = re.findall(r'"([^"]+)"', headline)
    checks += 1
    if not quoted:
        failures.append(f"bench/RESULTS.md: {name}'s line quotes no headline figure")
    wanted = [("headline figure", q) for q in quoted]
    wanted += [("CPU", f) for f in re.findall(r"(?:Intel\(R\) Xeon\(R\) Processor|Intel Xeon|AMD EPYC)", cpu)]
    wanted += [("command", command.strip("`"))]
    for kind, text in wanted:
        checks += 1
        if plain(text) not in topic:
            failures.append(f"bench/RESULTS.md: {name}'s {kind} '{text}' is not in bench/results/{name}")
    for family, model in re.findall(r"family (\d+), model (\d+)", cpu):
        checks += 1
        if not re.search(rf"family {family},? model {model}\b", topic):
            failures.append(f"bench/RESULTS.md: {name} does not say family {family}, model {model}")
checks += 1
unlisted = sorted(f for f in os.listdir(os.path.join(ROOT, "bench", "results")) if f.endswith(".md") and f not in listed)
if unlisted:
    failures.append(f"bench/RESULTS.md has no line for {', '.join(unlisted)}")

for path, text, value, stated, tol in CLAIMS:
    checks += 1
    if text not in read(path):
        failures.append(f"{path}: the claim '{text}' is gone; update bench/check_claims.py with the text")
    elif abs(value - stated) > tol + 1e-6:  # the text rounds to its digits
        failures.append(f"{path}: '{text}' states {stated}, the data gives {value:.3f}")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")  # one failure at most per check
sys.exit(1 if failures else 0)
