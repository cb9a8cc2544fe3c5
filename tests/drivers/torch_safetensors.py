"""PyTorch's side of the safetensors round trip (tests/drivers/test_safetensors.sh).

A safetensors reader and writer in a few lines (json + struct + torch.frombuffer: no extra
package), and the checks:
  check-export W.safetensors eval.csv     hddp's exported weights in the tutorial's nn.Sequential
                                          predict eval.csv's g within 1e-6 relative (max-norm:
                                          max |g - g_hddp| / max |g_hddp|; one float32 ulp of
                                          the scaled output is ~3e-8 of it)
  write-init OUT.safetensors SEED         PyTorch's initial weights of the tutorial model
  check-step W0 batch.csv W1 LR           one PyTorch Adam step from W0 on hddp's batch equals
                                          hddp's (W1) within 1e-6
  make-bad GOOD DIR                       damaged and mismatched files for the error tests
  check-mnist W.safetensors DATA N ACC    mnist_train's exported model (MLP or CNN) in PyTorch,
                                          on the first N test images of DATA (IDX files):
                                          its accuracy equals ACC (hddp's) within 1 image
Several in one run: CMD ARGS -- CMD ARGS ... (exit 1 if any check failed).
"""
import json
import os
import re
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def load(path):
    """name -> tensor, and the __metadata__ dict."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = bytearray(raw[8 + n :])
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(data[b:end], dtype=DTYPES[e["dtype"]]) if end > b else torch.empty(0)
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta


def save(path, tensors, meta=None):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def model_from(layers):
    """The nn.Sequential an hddp layer list ("Linear(1, 20) -> Linear(20, 1, bias=False) -> Tanh()") names."""
    mods = []
    for part in layers.split(" -> "):
        if m := re.fullmatch(r"Linear\((\d+), (\d+)(, bias=False)?\)", part):
            mods.append(torch.nn.Linear(int(m[1]), int(m[2]), bias=m[3] is None))
        elif m := re.fullmatch(r"Conv2d\((\d+), (\d+), kernel_size=(\d+), stride=(\d+)(?:, padding=(\d+))?(, bias=False)?\)", part):
            mods.append(torch.nn.Conv2d(int(m[1]), int(m[2]), int(m[3]), stride=int(m[4]), padding=int(m[5] or 0),
                                        bias=m[6] is None))
        elif m := re.fullmatch(r"MaxPool2d\(kernel_size=(\d+), stride=(\d+)\)", part):
            mods.append(torch.nn.MaxPool2d(int(m[1]), stride=int(m[2])))
        elif m := re.fullmatch(r"Dropout\(p=([0-9.e-]+)\)", part):
            mods.append(torch.nn.Dropout(float(m[1])))
        elif part in ("Tanh()", "ReLU()", "Flatten()"):
            mods.append({"Tanh()": torch.nn.Tanh, "ReLU()": torch.nn.ReLU, "Flatten()": torch.nn.Flatten}[part]())
        else:
            raise SystemExit(f"unknown layer {part!r}")
    return torch.nn.Sequential(*mods)


TUTORIAL = "Linear(1, 20) -> Linear(20, 1, bias=False) -> Tanh()"


def check_export(weights, eval_csv):
    w, meta = load(weights)
    model = model_from(meta["hddp.layers"])
    model.load_state_dict(w)  # strict: every name and shape as PyTorch names them
    xmin, xmax, ymin, ymax = (float(meta[k]) for k in ("hddp.x_min", "hddp.x_max", "hddp.y_min", "hddp.y_max"))
    rows = [line.split(",") for line in open(eval_csv).read().split("\n")[1:] if line]
    x = torch.tensor([float(r[0]) for r in rows], dtype=torch.float64)
    xs = ((x - xmin) / (xmax - xmin) * 2 - 1).float().reshape(-1, 1)  # MinMax to [-1, 1]
    with torch.no_grad():
        g = (model(xs).double().reshape(-1) + 1) / 2 * (ymax - ymin) + ymin
    want = torch.tensor([float(r[2]) for r in rows], dtype=torch.float64)
    rel = ((g - want).abs().max() / want.abs().max()).item()
    print(f"check-export: {len(rows)} points, max relative difference {rel:.3g}")
    assert rel <= 1e-6, f"PyTorch's predictions differ from eval.csv by {rel:.3g} (relative)"


def write_init(path, seed):
    torch.manual_seed(int(seed))
    model = model_from(TUTORIAL)
    save(path, dict(model.state_dict()), {"format": "pt"})


def check_step(w0, batch_csv, w1, lr):
    model = model_from(TUTORIAL)
    model.load_state_dict(load(w0)[0])
    rows = [line.split(",") for line in open(batch_csv).read().split("\n")[1:] if line]
    x = torch.tensor([[float(r[0])] for r in rows])
    y = torch.tensor([[float(r[1])] for r in rows])
    opt = torch.optim.Adam(model.parameters(), lr=float(lr))
    opt.zero_grad()
    torch.nn.MSELoss()(model(x), y).backward()
    opt.step()
    hddp = load(w1)[0]
    worst = 0.0
    for name, p in model.state_dict().items():
        d = ((p - hddp[name]).abs() / (1e-6 + p.abs())).max().item()
        worst = max(worst, d)
    print(f"check-step: {len(rows)} samples, max difference {worst:.3g} (relative, floor 1e-6)")
    assert worst <= 1e-6, f"one hddp Adam step differs from PyTorch's by {worst:.3g}"


def read_idx(path):
    import gzip
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return torch.frombuffer(bytearray(raw[4 + 4 * nd:]), dtype=torch.uint8).reshape(dims)


def check_mnist(weights, data, n, acc):
    w, meta = load(weights)
    model = model_from(meta["hddp.layers"])
    model.load_state_dict(w)
    model.eval()
    n = int(n)
    x = read_idx(os.path.join(data, "t10k-images-idx3-ubyte"))[:n].float() / 255.0
    y = read_idx(os.path.join(data, "t10k-labels-idx1-ubyte"))[:n].long()
    if isinstance(model[0], torch.nn.Conv2d):
        x = x.reshape(n, 1, 28, 28)  # NCHW, as hddp's input
    with torch.no_grad():
        correct = int((model(x).argmax(1) == y).sum())
    print(f"check-mnist: {meta['hddp.layers']}: {correct} of {n} correct in PyTorch, hddp's accuracy {float(acc):.4f}")
    assert abs(correct - float(acc) * n) <= 1, f"PyTorch's accuracy {correct / n:.4f} differs from hddp's {float(acc):.4f}"


def make_bad(good, out):
    raw = open(good, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]

    def with_header(h, d=data):
        hb = json.dumps(h).encode()
        return struct.pack("<Q", len(hb)) + hb + d

    bad = {
        "truncated": raw[: len(raw) - 7],
        "header_past_end": struct.pack("<Q", len(raw)) + raw[8:],
        "not_json": struct.pack("<Q", n) + b"{" + b"x" * (n - 1) + data,
        "overlap": with_header({**header, "0.bias": {**header["0.bias"], "data_offsets": [40, 120]}}),
        "tiny": b"\x01\x02",
    }
    w, meta = load(good)
    wide = {k: torch.cat([v, v[:1]]) if k == "0.weight" else v for k, v in w.items()}
    for name, tensors in {"f64": {k: v.double() for k, v in w.items()}, "wrong_shape": wide,
                          "missing": {k: v for k, v in w.items() if k != "1.weight"},
                          "extra": {**w, "2.weight": torch.zeros(1)}}.items():
        save(os.path.join(out, name + ".safetensors"), tensors, meta)
    for name, b in bad.items():
        open(os.path.join(out, name + ".safetensors"), "wb").write(b)


if __name__ == "__main__":
    # Several commands in one process (importing torch costs seconds): CMD ARGS [-- CMD ARGS]...
    commands = {"check-export": check_export, "write-init": write_init, "check-step": check_step, "make-bad": make_bad,
                "check-mnist": check_mnist}
    words, failed = sys.argv[1:], False
    while words:
        n = words.index("--") if "--" in words else len(words)
        cmd, args, words = words[0], words[1:n], words[n + 1:]
        try:
            commands[cmd](*args)
        except AssertionError as e:
            print(f"{cmd}: {e}")
            failed = True
    sys.exit(1 if failed else 0)
