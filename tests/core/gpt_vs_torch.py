#!/usr/bin/env python3
"""hddp's GPT (core/gpt.h) against PyTorch's own modules (nn.LayerNorm, nn.Linear,
nn.GELU(approximate='tanh'), F.embedding, softmax attention, F.cross_entropy: the model of
bench/gpt/gpt_pytorch.py) on the same weights and tokens: the logits, the loss and every
parameter's gradient, the tied embedding's included.
Usage: gpt_vs_torch.py GPT_GRADS_BINARY SCRATCH_DIR [bf16]
Float: logits within 2e-5 of PyTorch's largest, loss within 1e-5 relative, each gradient within
1e-4 of its largest value (float32 sums in another order). bf16 (a larger model, whose products
a bf16 unit takes): hddp's products round their operands to bf16 and sum in float, compared with
PyTorch's float model: logits within 5e-2, gradients within 1e-1 of their largest value (bf16's
2^-8 through two blocks and back), loss within 1e-2; and the logits differ from float's where a
unit exists (rounded) and equal them bit for bit where none does."""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"FAIL: {e} (bash scripts/setup-deps.sh tests installs python3-torch and python3-numpy)")
    sys.exit(1)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "gpt"))
sys.path.insert(0, os.path.join(here, "..", "drivers"))
from gpt_pytorch import build_model  # noqa: E402
from torch_safetensors import load  # noqa: E402

binary, scratch = sys.argv[1], sys.argv[2]
bf16 = len(sys.argv) > 3 and sys.argv[3] == "bf16"
os.makedirs(scratch, exist_ok=True)
out = subprocess.run([binary, scratch] + (["bf16"] if bf16 else []), check=True, timeout=120, capture_output=True, text=True)
cfg = json.loads(out.stdout)
weights, _ = load(os.path.join(scratch, "weights.safetensors"))
grads, _ = load(os.path.join(scratch, "grads.safetensors"))
B, T, V = cfg["batch"], cfg["context"], cfg["vocab"]
tok = np.fromfile(os.path.join(scratch, "tokens.i32"), dtype=np.int32).astype(np.int64)
x, y = torch.from_numpy(tok[: B * T].reshape(B, T)), torch.from_numpy(tok[B * T :].reshape(B, T))
logits_hddp = torch.from_numpy(np.fromfile(os.path.join(scratch, "logits.f32"), dtype=np.float32).reshape(B, T, V))

model = build_model(V, T, cfg["layers"], cfg["heads"], cfg["dim"])
names = dict(model.named_parameters())
assert set(names) == set(weights), f"parameter names differ: hddp {sorted(weights)}, PyTorch {sorted(names)}"
model.load_state_dict({n: weights[n].reshape(p.shape) for n, p in names.items()})
logits = model(x)
loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
loss.backward()

tol = 1e-1 if bf16 else 1e-4
failed = False


def check(what, got, want, rel):
    global failed
    err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
    ok = err <= rel
    failed |= not ok
    print(f"{'ok' if ok else 'FAIL'}: {what}: max |hddp - PyTorch| / max |PyTorch| = {err:.2e} (limit {rel:.0e})")


check("logits", logits_hddp, logits.detach(), 5e-2 if bf16 else 2e-5)
lerr = abs(cfg["loss"] - loss.item()) / loss.item()
ok = lerr <= (1e-2 if bf16 else 1e-5)
failed |= not ok
print(f"{'ok' if ok else 'FAIL'}: loss hddp {cfg['loss']:.7f}, PyTorch {loss.item():.7f} (relative {lerr:.1e})")
for n, p in names.items():
    check(f"grad {n} {tuple(p.shape)}", grads[n].reshape(p.shape), p.grad, tol)
if bf16:  # rounded where a unit takes the products (kernels/units.h), float bit for bit where none does
    same = torch.equal(logits_hddp, logits.detach())
    rounded = cfg["bf16_unit"] != "float"
    ok = same != rounded or not rounded
    failed |= not ok
    print(f"{'ok' if ok else 'FAIL'}: bf16 unit {cfg['bf16_unit']}: logits {'differ from' if not same else 'equal'} float's")
print(f"torch {torch.__version__}, {len(names)} tensors")
sys.exit(1 if failed else 0)
