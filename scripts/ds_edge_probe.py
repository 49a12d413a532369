"""Triage of a dK:nonfinite failure of our TileLang kernel on the H200: its shrunk Problem with
its own inputs, on the CPU. Prints, for the failing dK row (sequence 5, key 1, head 32), the float64 dS
behind it against fp16's overflow edge (65520), the flash-style yardstick's dS there, the band by which one
ulp of the stored O moves it (P 2u sum|O dO|), and the dK rows the yardstick marks as at the edge.
``python3 scripts/ds_edge_probe.py`` (~5 s)"""

import torch

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import flash_style_reference
from difftest.oracles.reference import allowed_mask

PROBLEM = Problem(batch=12, seqlen_q=(110, 384, 176, 290, 255, 96, 83, 0, 414, 128, 192, 538),
                  seqlen_k=(110, 200, 65, 70, 239, 3, 90, 13, 161, 92, 385, 538), heads_q=62, heads_kv=62,
                  head_dim_qk=128, head_dim_v=64, dtype="float16", window_left=539, window_right=64,
                  align="bottom_right", values="large_do", value_scale=4.129012993405622, pad_tail=231, seed=12735)
SEQ, KEY, HEAD = 5, 1, 32


def main() -> None:
    p = PROBLEM.validate()
    x = make_inputs(p)
    q0, k0 = p.cu_seqlens_q[SEQ], p.cu_seqlens_k[SEQ]
    sq, sk = p.seqlens_q[SEQ], p.seqlens_k[SEQ]
    q, k, v, do = (t.double() for t in (x.q[q0:q0 + sq, HEAD], x.k[k0:k0 + sk, HEAD], x.v[k0:k0 + sk, HEAD],
                                        x.do[q0:q0 + sq, HEAD]))
    pr = torch.softmax((q @ k.T * p.scale).masked_fill(~allowed_mask(p, sq, sk), float("-inf")), -1).nan_to_num(0.0)
    for label, o in (("float64", pr @ v), ("yardstick-like (P, O rounded to fp16, float32)", None)):
        if o is None:  # the rounding points of oracles/flash_style.py, in float32
            pf, vf, dof = pr.float(), v.float(), do.float()
            o = (pf.half().float() @ vf).half().float()
            ds = pf * (dof @ vf.T - (o * dof).sum(-1, keepdim=True))
        else:
            ds = pr * (do @ v.T - (o * do).sum(-1, keepdim=True))
        i = int(ds[:, KEY].abs().argmax())
        print(f"{label}: |dS| behind the dK row {float(ds[i, KEY].abs()):.1f} (row {i}); fp16's edge 65520")
    band = float((pr[i, KEY] * (o[i].abs() * do[i].float().abs()).sum() * 2 ** -10))
    print(f"one ulp of the stored O moves it by up to {band:.1f}")
    y = flash_style_reference(x)
    edge = y.overflow_edge["dk"]
    nonfinite = ~torch.isfinite(y.dk).all(-1)
    print(f"the yardstick's dK row: {'finite' if bool(torch.isfinite(y.dk[k0 + KEY, HEAD]).all()) else 'non-finite'}; "
          f"rows at the edge: {int(edge.sum())} (the yardstick's non-finite ones: {int(nonfinite.sum())}, "
          f"this one marked: {bool(edge[k0 + KEY, HEAD])})")


if __name__ == "__main__":
    main()
