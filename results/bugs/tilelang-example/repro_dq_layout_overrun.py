"""TileLang examples/flash_attention/example_gqa_bwd.py (as posted in seed 004, and unchanged
in current upstream): `make_dq_layout` maps dQ[b, l, h, d] to
[b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]. TileLang sizes the remapped
buffer from that map's range, i.e. ceil(seq_len / 8) * 8 rows per batch, but dQ is the
caller's [batch, seq_len, heads, dim] float32 tensor. When seq_len % 8 != 0 the backward's
atomicAdds into dQ (flashattn_bwd) and the postprocess's reads (flashattn_bwd_postprocess)
run past the end of the dQ allocation by batch * (ceil8(seq_len) - seq_len) * heads * dim
floats: they overwrite whatever tensor follows dQ in memory and read it back into dQ.

Standalone: needs torch, tilelang and the kernel file only (not difftest).

    python3 repro_dq_layout_overrun.py /path/to/example_gqa_bwd.py      # or set $SEED004

dQ is handed to the kernels as the front of a larger float32 buffer whose tail (the
"neighbour", standing for the tensor that follows dQ, e.g. dK) holds the marker 1000.0.
LSE and Delta come from a float64 PyTorch forward (the kernel's own forward is not used), so
the backward is judged alone. Prints one JSON line per shape (neighbour elements changed,
dQ/dK/dV max error vs float64 autograd, and whether the wrong dQ elements are exactly those
whose make_dq_layout offset lies past the end of dQ), then a verdict line. Exit 1 when the
overrun shows, 0 when not, 2 on bad usage.
"""
import importlib.util
import json
import math
import os
import sys

import torch

BLOCK_M, BLOCK_N = 64, 32  # the example's _attention.backward
MARKER = 1000.0
# (name, batch, seq_len, heads, heads_kv, head_dim, causal): the campaign's class, and a control
SHAPES = [
    ("b2_s65_h2of1_d64", 2, 65, 2, 1, 64, False),
    ("control_b2_s64_h2of1_d64", 2, 64, 2, 1, 64, False),
]


def load(path):
    spec = importlib.util.spec_from_file_location("seed004_example_gqa_bwd", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_all(jit, configs):
    if hasattr(jit, "par_compile"):
        try:
            return jit.par_compile(configs, num_workers=min(len(configs), os.cpu_count() or 1))
        except Exception as e:  # noqa: BLE001 -- fall back to one compile after another
            print(f"par_compile failed ({type(e).__name__}: {e}); compiling one by one", file=sys.stderr)
    return [jit(*c) for c in configs]


def dq_layout_offset(b, s, h, d, device):
    """Flat float offset of every dQ[b, l, h, d] under make_dq_layout, with TileLang's extents
    (ceil(s/8) row groups; the last dim 32 when s >= 8)."""
    groups = -(-s // 8)
    inner = 32 if s >= 8 else 4 * (s - 1) + 4
    B, L, H, D = torch.meshgrid(*(torch.arange(n, device=device) for n in (b, s, h, d)), indexing="ij")
    return (((((B * groups + L // 8) * h + H) * (d // 8) + D // 8) * 2 + D % 2) * inner
            + 4 * (L % 8) + (D % 8) // 2)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SEED004", "")
    if not path or not os.path.isfile(path):
        print(f"usage: {sys.argv[0]} PATH/example_gqa_bwd.py (or set $SEED004); got {path!r}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    mod = load(path)
    bwd = compile_all(mod.flashattn_bwd,
                      [(b, h, s, d, d, c, BLOCK_M, BLOCK_N, h // hk) for _, b, s, h, hk, d, c in SHAPES])
    post = compile_all(mod.flashattn_bwd_postprocess, [(b, h, s, d) for _, b, s, h, _, d, _ in SHAPES])
    shown = []
    for (name, b, s, h, hk, d, causal), kb, kp in zip(SHAPES, bwd, post):
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.float16, generator=g)
        k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.float16, generator=g) for _ in range(2))
        do = torch.randn(b, s, h, d, device="cuda", dtype=torch.float16, generator=g)
        # float64 autograd truth (kv head = q head // groups, as the example)
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        kr, vr = (t.repeat_interleave(h // hk, dim=2) for t in (k64, v64))
        logits = torch.einsum("bqhd,bkhd->bhqk", q64, kr) / math.sqrt(d)
        if causal:
            logits = logits.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
        lse = torch.logsumexp(logits, dim=-1)  # [b, h, s]
        o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(logits, dim=-1), vr)
        o.backward(do.double())
        # the kernel's inputs: base-2 LSE of the scaled logits, Delta = rowsum(O * dO) from fp16 O
        lse2 = (lse.detach() / math.log(2.0)).float().contiguous()
        delta = (o.detach().half().float() * do.float()).sum(-1).transpose(1, 2).contiguous()
        n = b * s * h * d
        arena = torch.full((n + (1 << 16),), MARKER, device="cuda", dtype=torch.float32)
        arena[:n] = 0.0
        dq32 = arena[:n].view(b, s, h, d)
        dk = torch.zeros(b, s, hk, d, device="cuda", dtype=torch.float16)
        dv = torch.zeros(b, s, hk, d, device="cuda", dtype=torch.float16)
        kb(q, k, v, do, lse2, delta, dq32, dk, dv)
        torch.cuda.synchronize()
        neighbour_written = int((arena[n:] != MARKER).sum().item())
        dq = kp(dq32)
        torch.cuda.synchronize()
        err = {x: (got.double() - ref.grad).abs()
               for x, got, ref in (("dq", dq, q64), ("dk", dk, k64), ("dv", dv, v64))}
        wrong = err["dq"] > 1.0
        beyond = dq_layout_offset(b, s, h, d, "cuda") >= n
        rows = sorted({(int(i[0]), int(i[1])) for i in wrong.nonzero()})
        row = {"case": name, "batch": b, "seq_len": s, "heads": h, "heads_kv": hk, "head_dim": d, "causal": causal,
               "dq_floats": n, "layout_floats": b * -(-s // 8) * 8 * h * d,
               "neighbour_floats_overwritten": neighbour_written,
               "dq_elements_mapped_past_end": int(beyond.sum().item()),
               "dq_wrong_elements": int(wrong.sum().item()),
               "dq_wrong_exactly_the_past_end_ones": bool(torch.equal(wrong, beyond)),
               "dq_wrong_rows_(batch,token)": rows[:16],
               **{f"{x}_max_err": e.max().item() for x, e in err.items()},
               "dq_max_err_elsewhere": err["dq"][~beyond].max().item()}
        row["overrun"] = neighbour_written > 0 or row["dq_wrong_elements"] > 0
        print(json.dumps(row), flush=True)
        if row["overrun"]:
            shown.append(name)
    print(json.dumps({"verdict": "bug reproduced" if shown else "not reproduced", "overrun_cases": shown,
                      "note": "seq_len % 8 != 0: make_dq_layout addresses ceil(seq_len/8)*8 rows of a seq_len-row dQ"}))
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())
