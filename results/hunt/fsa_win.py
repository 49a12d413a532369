# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
from fsa_run import *


def ref_win(q, k, v, ws):
    # q [B,S,H,D]; ws [Hk,4] = sink,left,right,near; bottom-right aligned
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    H, Hk = q.shape[1], k.shape[1]
    g = H // Hk
    k = k.repeat_interleave(g, 1)
    v = v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    sq, sk = s.shape[-2:]
    qi = torch.arange(sq)[:, None]
    kj = torch.arange(sk)[None]
    near = qi + sk - sq - kj
    allow = torch.zeros(H, sq, sk, dtype=torch.bool)
    for h in range(H):
        sink, left, right, nw = ws[h // g].tolist()
        a = (
            ((near >= 0) & (near < nw))
            | ((near >= nw + right) & (near < nw + right + left))
            | ((kj < sink) & (near >= 0))
        )
        allow[h] = a
    s = s.masked_fill(~allow, float("-inf"))
    return (s.softmax(-1).nan_to_num(0.0) @ v).transpose(1, 2)


def run_win(B, sq, sk, H, Hk, D, ws, dtype=torch.float16, seed=0, **kw):
    ws = torch.tensor(ws, dtype=torch.int32)
    return run(
        fsa.flash_dense_attn_func,
        B,
        sq,
        sk,
        H,
        Hk,
        D,
        False,
        dtype=dtype,
        seed=seed,
        reffn=lambda q, k, v, c: ref_win(q, k, v, ws),
        window_sizes=ws,
        **kw,
    )
