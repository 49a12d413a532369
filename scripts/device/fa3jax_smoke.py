"""Standalone smoke of flash-attn3-jax 0.2.3 on the H200 (no difftest import): does the
package import under the device's JAX, and do its public forward+backward agree with float64
torch? One JSON line per configuration on stdout:

  main      b1 s128 h2/1 d128 bf16 causal      (the brief's smoke: GQA, one built width)
  s100      b1 s100 h2/2 d128 bf16 unmasked    (FA3's unmasked d128 backward tile is 80 rows,
            flash_hlo.py allocates its softmax_d/lse_log2 scratch rounded to 128 rows: 100
            rounds to 160 in the kernel but 128 in the buffer -- an overflow if the kernel
            writes whole tiles; wrong dQ/dK/dV here would say so)
  d64       b1 s128 h2/2 d64 bf16 causal       (README: wheel built for 128 only; the C++
            rounds d <= 128 up to the 128 kernel, so this should be served correctly)
  d192      b1 s64 h2/2 d192 bf16              (expected: a clean refusal, max head dim 128)
  varlen    seqs q (3, 70) k (90, 5) h2/1 d128 bf16 causal, with the LSE read both as FA3's
            [H, total_q] from the buffer start and as the declared [B, H, max_seqlen_q]

Each line: config, ok (no exception), error text if any, max |err| of o, lse, dq, dk, dv
against float64 torch and the reference's max |value| (bf16 noise is ~1e-2 relative).
Run: PYTHONPATH=/tmp/site python3 scripts/device/fa3jax_smoke.py
"""

import json
import math
import os
import sys
import traceback

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def reference(q, k, v, do, causal, scale, cu_q=None, cu_k=None):
    """float64 torch attention on [T, H, D] packed sequences (bottom-right causal);
    returns o, lse [T, H], dq, dk, dv as float64 numpy."""
    q, k, v, do = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v, do))
    do = do.detach()
    hq, hk = q.shape[1], k.shape[1]
    cu_q = cu_q or [0, q.shape[0]]
    cu_k = cu_k or [0, k.shape[0]]
    outs, lses = [], []
    for b in range(len(cu_q) - 1):
        qb = q[cu_q[b]:cu_q[b + 1]].transpose(0, 1)
        kb = k[cu_k[b]:cu_k[b + 1]].transpose(0, 1).repeat_interleave(hq // hk, 0)
        vb = v[cu_k[b]:cu_k[b + 1]].transpose(0, 1).repeat_interleave(hq // hk, 0)
        s = qb @ kb.transpose(-1, -2) * scale
        sq, sk = s.shape[-2:]
        if causal:
            i = torch.arange(sq)[:, None]
            j = torch.arange(sk)[None, :]
            s = s.masked_fill(j > i + (sk - sq), float("-inf"))
        lse = torch.logsumexp(s, -1)
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        outs.append((p @ vb).transpose(0, 1))
        lses.append(lse.transpose(0, 1))
    o = torch.cat(outs)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return [x.detach().numpy() for x in (o, torch.cat(lses), dq, dk, dv)]


def err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    fin = np.isfinite(b)
    return {"max_abs_err": float(np.max(np.abs(a - b)[fin])) if fin.any() else None,
            "ref_max": float(np.max(np.abs(b[fin]))) if fin.any() else None,
            "nonfinite_got": int((~np.isfinite(a)).sum())}


def run_dense(name, b, s, hq, hk, d, causal):
    import jax
    import jax.numpy as jnp
    from flash_attn3_jax import flash, flash_mha

    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float32) for shape in
                   ((b, s, hq, d), (b, s, hk, d), (b, s, hk, d), (b, s, hq, d)))
    scale = 1.0 / math.sqrt(d)
    bf = [jnp.asarray(x, dtype=jnp.bfloat16) for x in (q, k, v, do)]
    f = lambda q, k, v: flash_mha(q, k, v, softmax_scale=scale, is_causal=causal)  # noqa: E731
    o, vjp = jax.vjp(f, *bf[:3])
    dq, dk, dv = vjp(bf[3])
    _, lse = jax.jit(flash._flash_mha_fwd, static_argnums=(3, 4, 5))(*bf[:3], scale, causal, (-1, -1))
    rounded = [np.asarray(x.astype(jnp.float32)) for x in bf]
    ref = reference(*(x.reshape(b * s, *x.shape[2:]) for x in rounded), causal, scale)
    got = [np.asarray(x.astype(jnp.float32)).reshape(b * s, *x.shape[2:]) for x in (o, dq, dk, dv)]
    lse_thd = np.asarray(lse).transpose(0, 2, 1).reshape(b * s, hq)  # [B, H, S] -> [T, H]
    names = ("o", "lse", "dq", "dk", "dv")
    got = [got[0], lse_thd, *got[1:]]
    return {n: err(g, r) for n, g, r in zip(names, got, ref)}


def run_varlen(seq_q, seq_k, hq, hk, d, causal):
    import jax
    import jax.numpy as jnp
    from flash_attn3_jax import flash_mha_varlen
    from flash_attn3_jax.varlen_fwd import flash_mha_varlen_fwd

    rng = np.random.default_rng(1)
    tq, tk = sum(seq_q), sum(seq_k)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float32) for shape in
                   ((tq, hq, d), (tk, hk, d), (tk, hk, d), (tq, hq, d)))
    cu_q = [0, *np.cumsum(seq_q).tolist()]
    cu_k = [0, *np.cumsum(seq_k).tolist()]
    scale = 1.0 / math.sqrt(d)
    bf = [jnp.asarray(x, dtype=jnp.bfloat16) for x in (q, k, v, do)]
    jcq, jck = jnp.asarray(cu_q, jnp.int32), jnp.asarray(cu_k, jnp.int32)
    mq, mk = max(seq_q), max(seq_k)
    f = lambda q, k, v: flash_mha_varlen(q, k, v, jcq, jck, None, mq, mk, scale, causal)  # noqa: E731
    o, vjp = jax.vjp(f, *bf[:3])
    dq, dk, dv = vjp(bf[3])
    _, lse = flash_mha_varlen_fwd(*bf[:3], jcq, jck, None, mq, mk, scale, causal)
    lse = np.asarray(lse)  # declared [B, H, max_seqlen_q]
    as_ht = lse.reshape(-1)[:hq * tq].reshape(hq, tq).T
    as_bhm = np.concatenate([lse[b, :, :n].T for b, n in enumerate(seq_q)])
    rounded = [np.asarray(x.astype(jnp.float32)) for x in bf]
    ref = reference(*rounded, causal, scale, cu_q, cu_k)
    got = [np.asarray(x.astype(jnp.float32)) for x in (o, dq, dk, dv)]
    out = {n: err(g, r) for n, g, r in zip(("o", "dq", "dk", "dv"), got, [ref[0], *ref[2:]])}
    out["lse_as_H_by_total_q"] = err(as_ht, ref[1])
    out["lse_as_B_H_maxq"] = err(as_bhm, ref[1])
    return out


CONFIGS = [
    ("main", lambda: run_dense("main", 1, 128, 2, 1, 128, True)),
    ("s100", lambda: run_dense("s100", 1, 100, 2, 2, 128, False)),
    ("d64", lambda: run_dense("d64", 1, 128, 2, 2, 64, True)),
    ("d192", lambda: run_dense("d192", 1, 64, 2, 2, 192, False)),
    ("varlen", lambda: run_varlen((3, 70), (90, 5), 2, 1, 128, True)),
]


def main() -> int:
    try:
        import flash_attn3_jax
        import jax
        print(json.dumps({"config": "import", "ok": True, "jax": jax.__version__,
                          "flash_attn3_jax": flash_attn3_jax.__version__, "devices": [str(x) for x in jax.devices()]}))
    except Exception as e:  # noqa: BLE001 -- the smoke's first answer
        print(json.dumps({"config": "import", "ok": False, "error": f"{type(e).__name__}: {e}",
                          "trace": traceback.format_exc()[-1500:]}))
        return 1
    only = sys.argv[1:]
    for name, fn in CONFIGS:
        if only and name not in only:
            continue
        try:
            print(json.dumps({"config": name, "ok": True, **fn()}), flush=True)
        except Exception as e:  # noqa: BLE001 -- one config's failure is its result
            print(json.dumps({"config": name, "ok": False, "error": f"{type(e).__name__}: {str(e)[:600]}"}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
