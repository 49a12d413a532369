"""TileLang examples/flash_attention/example_gqa_bwd.py (as posted in tile-ai/tilelang
issue "Regarding the bwd cost of flash-attn3 in TileLang", Sept 2025, before PR #1222):
the NON-causal forward `flashattn_fwd` does not mask the keys past seq_len in its last
64-key tile. It starts each tile with `T.clear(acc_s)` (logit 0) instead of -inf, the
out-of-range K/V rows are loaded as zeros, so every padded key enters the softmax with
logit 0 and value 0: LSE becomes log(exp(LSE_true) + n_pad) and O shrinks by
exp(LSE_true) / (exp(LSE_true) + n_pad), where n_pad = ceil(seq_len / 64) * 64 - seq_len.

Standalone: needs torch, tilelang and the kernel file only (not difftest).

    python3 repro_tail_keys.py /path/to/example_gqa_bwd.py      # or set $SEED004

Compiles flashattn_fwd for a few shapes (one compile each, in parallel) and compares O and
LSE (the kernel's LSE is base 2 of the scaled logits: natural = lse * ln 2) with a float64
PyTorch reference on the same fp16 inputs, next to what plain fp16 PyTorch attention costs.
Prints one JSON line per shape, then a verdict line. Exit 1 when a shape shows the bug,
0 when none does, 2 on bad usage.
"""
import importlib.util
import json
import math
import os
import sys

import torch

BLOCK_M, BLOCK_N = 128, 64  # the example's _attention.forward
RATIO_BUG = 5.0  # kernel error / plain-fp16 error above this is a wrong result
FLOOR = 1e-3  # fp16 yardstick floor (a 1-key softmax is exact in fp16)
# (name, batch, seq_len, heads, head_dim, causal): the shrunk case, two tails, one d64, two controls
SHAPES = [
    ("s1_d16", 1, 1, 1, 16, False),
    ("s65_d16", 1, 65, 1, 16, False),
    ("s127_d16", 1, 127, 1, 16, False),
    ("s100_d64", 1, 100, 1, 64, False),
    ("control_s128_d16", 1, 128, 1, 16, False),
    ("control_causal_s65_d16", 1, 65, 1, 16, True),
]


def load(path):
    spec = importlib.util.spec_from_file_location("seed004_example_gqa_bwd", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_all(jit, configs):
    """The jit function compiled for each positional config (parallel where tilelang can)."""
    if hasattr(jit, "par_compile"):
        try:
            return jit.par_compile(configs, num_workers=min(len(configs), os.cpu_count() or 1))
        except Exception as e:  # noqa: BLE001 -- fall back to one compile after another
            print(f"par_compile failed ({type(e).__name__}: {e}); compiling one by one", file=sys.stderr)
    return [jit(*c) for c in configs]


def reference(q, k, v, causal, n_pad=0):
    """float64 attention over [B, S, H, D] (heads equal); with n_pad > 0 the model of the bug:
    n_pad extra keys of logit 0 and value 0. Returns O [B, S, H, D] and natural LSE [B, H, S]."""
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))  # B H S D
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    if n_pad:
        s = torch.cat([s, s.new_zeros(*s.shape[:-1], n_pad)], dim=-1)
        v = torch.cat([v, v.new_zeros(*v.shape[:-2], n_pad, v.shape[-1])], dim=-2)
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ v
    return o.transpose(1, 2), lse


def plain_fp16(q, k, v, causal):
    """What ordinary PyTorch attention in fp16 returns (the rounding yardstick)."""
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    s = (qt @ kt.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))  # fp16 logits
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s.float(), dim=-1)
    o = torch.softmax(s.float(), dim=-1).half() @ vt
    return o.transpose(1, 2), lse


def maxerr(a, b):
    return (a.double() - b.double()).abs().max().item()


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SEED004", "")
    if not path or not os.path.isfile(path):
        print(f"usage: {sys.argv[0]} PATH/example_gqa_bwd.py (or set $SEED004); got {path!r}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    mod = load(path)
    kernels = compile_all(mod.flashattn_fwd, [(b, h, s, d, d, c, BLOCK_M, BLOCK_N, 1) for _, b, s, h, d, c in SHAPES])
    shown = []
    for (name, b, s, h, d, causal), kern in zip(SHAPES, kernels):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        o, lse2 = kern(q, k, v)
        torch.cuda.synchronize()
        lse = lse2.double() * math.log(2.0)  # base 2 of the scaled logits -> natural
        o_ref, lse_ref = reference(q, k, v, causal)
        o16, lse16 = plain_fp16(q, k, v, causal)
        n_pad = 0 if causal else -s % BLOCK_N  # causal masks the padded keys; non-causal cannot
        o_pad, lse_pad = reference(q, k, v, causal, n_pad)
        row = {"case": name, "batch": b, "seq_len": s, "heads": h, "head_dim": d, "causal": causal,
               "padded_keys_in_last_tile": n_pad}
        for out, got, ref, yard, pad in (("o", o, o_ref, o16, o_pad), ("lse", lse, lse_ref, lse16, lse_pad)):
            err, fp16_err = maxerr(got, ref), maxerr(yard, ref)
            row[f"{out}_err"] = err
            row[f"{out}_fp16_err"] = fp16_err
            row[f"{out}_ratio"] = err / max(fp16_err, FLOOR)
            row[f"{out}_err_vs_padded_model"] = maxerr(got, pad)  # ~ fp16 noise when the bug is the cause
        row["wrong"] = max(row["o_ratio"], row["lse_ratio"]) > RATIO_BUG
        if s == 1 and not causal:
            row["example"] = {"lse_truth": lse_ref.flatten()[0].item(), "lse_got": lse.flatten()[0].item(),
                              "log(exp(lse_truth) + 63)": math.log(math.exp(lse_ref.flatten()[0].item()) + 63)}
        print(json.dumps(row), flush=True)
        if row["wrong"]:
            shown.append(name)
    print(json.dumps({"verdict": "bug reproduced" if shown else "not reproduced", "wrong_cases": shown,
                      "note": "non-causal seq_len % 64 != 0: padded keys enter the softmax (logit 0, value 0)"}))
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())
