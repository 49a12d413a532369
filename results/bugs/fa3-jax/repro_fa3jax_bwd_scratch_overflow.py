"""flash-attn3-jax 0.2.3: the dense backward's softmax_d / softmax_lse_log2 buffers are too small.

No difftest, no torch: jax + numpy only. The Python lowering (flash_hlo.py:234) allocates both
per-row float32 scratch outputs of the `flash_mha_bwd` FFI call as [B, H, round_up(seqlen_q, 128)],
but FA3's C++ (flash.cpp, mha_bwd_impl) strides them by round_up(seqlen_q, kBlockM) with kBlockM
= 80 on sm90 for the one built head dim (128) when the call is neither causal nor local. Whenever
round_up(s, 80) > round_up(s, 128) (s in 81..128, 241..256, 321..384, ...) the preprocess kernel
writes B*H*(round80 - round128) floats past the buffers, into whatever XLA placed next.

    python3 repro_fa3jax_bwd_scratch_overflow.py            # sweep: one JSON line per (s, causal)
    python3 repro_fa3jax_bwd_scratch_overflow.py --one 100  # one unmasked call (for compute-sanitizer)
    XLA_PYTHON_CLIENT_ALLOCATOR=platform compute-sanitizer --tool memcheck \\
        python3 repro_fa3jax_bwd_scratch_overflow.py --one 100   # on the H200 memcheck reported 0 errors:
                                                                  # the writes stay inside memory XLA owns

Each sweep line: the kernel's and the buffer's rounded rows, the floats written past the end, and
max |error| / max |reference| of dQ, dK, dV against float64 numpy on the same bf16-rounded inputs
(bf16 rounding alone gives ~1e-2). Exit 1 if any call is wrong by more than 0.1.
"""

import argparse
import json
import math
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flash_attn3_jax import flash_mha  # noqa: E402

D, HEADS = 128, 2
SIZES = (64, 80, 81, 100, 128, 129, 160, 240, 241, 256, 257, 320, 321, 384, 385, 400)


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def reference(q, k, v, do, causal, scale):
    """float64 attention forward and backward on [B, S, H, D] (bottom-right causal)."""
    q, k, v, do = (np.asarray(x, np.float64).transpose(0, 2, 1, 3) for x in (q, k, v, do))
    s = scale * q @ k.transpose(0, 1, 3, 2)
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    dp = do @ v.transpose(0, 1, 3, 2)
    ds = p * (dp - (do * o).sum(-1, keepdims=True))
    grads = (scale * ds @ k, scale * ds.transpose(0, 1, 3, 2) @ q, p.transpose(0, 1, 3, 2) @ do)
    return [g.transpose(0, 2, 1, 3) for g in grads]


def run(s: int, causal: bool, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    arrays = [jnp.asarray(rng.standard_normal((1, s, HEADS, D)), jnp.bfloat16) for _ in range(4)]
    q, k, v, do = arrays
    scale = 1.0 / math.sqrt(D)
    _, vjp = jax.vjp(lambda q, k, v: flash_mha(q, k, v, softmax_scale=scale, is_causal=causal), q, k, v)
    got = [np.asarray(g.astype(jnp.float32), np.float64) for g in vjp(do)]
    ref = reference(*(np.asarray(x.astype(jnp.float32)) for x in arrays), causal, scale)
    kernel_rows = round_up(s, 64 if causal else 80)  # kBlockM for head dim 128 on sm90
    row = {"seqlen": s, "causal": causal, "kernel_rows": kernel_rows, "buffer_rows": round_up(s, 128),
           "floats_past_end": max(0, HEADS * (kernel_rows - round_up(s, 128)))}
    for name, g, r in zip(("dq", "dk", "dv"), got, ref):
        row[name] = float(np.max(np.abs(g - r)) / np.max(np.abs(r))) if np.isfinite(g).all() else "nonfinite"
    row["wrong"] = any(not isinstance(row[n], float) or row[n] > 0.1 for n in ("dq", "dk", "dv"))
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", type=int, help="one unmasked call at this sequence length")
    ap.add_argument("--repeats", type=int, default=1, help="sweep this many times (different seeds)")
    a = ap.parse_args()
    print(json.dumps({"jax": jax.__version__, "devices": [str(d) for d in jax.devices()]}), flush=True)
    rows = ([run(a.one, False)] if a.one else
            [run(s, c, seed) for seed in range(a.repeats) for c in (False, True) for s in SIZES])
    for row in rows:
        print(json.dumps(row), flush=True)
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
