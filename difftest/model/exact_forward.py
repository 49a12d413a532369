"""The exact float64 forward: O of a Problem over its rounded inputs with the same bits on
every device (``exact_forward_o``, with ``exact_exp`` and sums by halving).

An oracle in all but name, kept in model/ because the input draw needs it and the draw may
not import oracles/: ``values="loss_do"`` draws dO as O - target (structured_values.py), so
``make_inputs`` computes this forward, and model/ sits below execute/ (the isolation
worker draws a case's inputs) and oracles/ (every reference takes ``Inputs``) in the layer
order tests/test_layers.py enforces. The references themselves (oracles/) use autograd or
the chunked walk, which are exact to float64 rounding but not the same bits on every device.
"""

import math

import torch

from difftest.model.problem import Problem

# exp() from exact operations: fdlibm's split of ln 2 (n * LN2_HI is exact for |n| < 2^11)
# and a degree-13 Taylor polynomial on |r| <= ln(2)/2 (error < 2^-60), evaluated by Horner
# with one multiply and one add per step as separate operations (no fused multiply-add)
_LN2_HI, _LN2_LO, _LOG2E = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.4426950408889634
_EXP_COEFS = tuple(1.0 / math.factorial(i) for i in range(13, -1, -1))
_EXP_FLOOR = -700.0  # exp below this (< 1e-304) is taken as 0: it never moves a float64 sum of the row's max


def exact_exp(x: torch.Tensor) -> torch.Tensor:
    """exp(x) for float64 x <= 0 (-inf allowed), the same bits on every device: within a
    few ulp of exp, 0 below -700. The same operations as ever, run in place (each
    in-place step rounds exactly as the out-of-place one did)."""
    zero = x < _EXP_FLOOR
    x = x.masked_fill(zero, 0.0)
    n = torch.mul(x, _LOG2E).add_(0.5).floor_()
    r = x.sub_(n * _LN2_HI).sub_(n * _LN2_LO)  # x is this function's own copy
    y = torch.full_like(r, _EXP_COEFS[0])
    for c in _EXP_COEFS[1:]:
        y.mul_(r).add_(c)
    two_n = n.to(torch.int64).add_(1023).bitwise_left_shift_(52).view(torch.float64)
    return y.mul_(two_n).masked_fill_(zero, 0.0)


def _halve(x: torch.Tensor, n: int) -> torch.Tensor:
    """The sum over dim 0 of the ``n`` rows of ``x`` by halving, zero-padded to a power of
    two W: row i + W/2 added to row i, then i + W/4, ...: a fixed order of correctly
    rounded additions, the same bits on every device. ``x`` is overwritten. A term added
    to the padding's +0 becomes +0 where it was -0, as in the padded sum."""
    if n == 0:
        return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
    w = 1 << (n - 1).bit_length()
    h = w // 2
    if h:
        x[: n - h].add_(x[h:n])
        if n < w:
            x[n - h : h].add_(0.0)
    while h > 1:
        h //= 2
        x[:h].add_(x[h : 2 * h])
    return x[0]


class _Scratch:
    """Work buffers reused from one row chunk to the next: a fresh multi-megabyte tensor
    per product costs page faults on the CPU that took as long as the arithmetic."""

    def __init__(self, device):
        self.device, self.bufs = device, {}

    def get(self, name: str, shape) -> torch.Tensor:
        n = math.prod(shape)
        buf = self.bufs.get(name)
        if buf is None or buf.numel() < n:
            buf = self.bufs[name] = torch.empty(n, dtype=torch.float64, device=self.device)
        return buf[:n].view(shape)


def _dot_halving(qc: torch.Tensor, kc: torch.Tensor, scratch: _Scratch) -> torch.Tensor:
    """Sum over dim 0 (the head dim D) of qc * kc by ``_halve``'s order: qc [D, H, n, 1],
    kc [D, H, 1, m] -> [H, n, m], a view of scratch memory. Every product of two float16,
    bfloat16 or float32 values is exact in float64, so the first level is a multiply-add
    whose product needs no rounding (``addcmul``: fused or not, the same bits)."""
    d = qc.shape[0]
    h = (1 << (d - 1).bit_length()) // 2
    shape = (max(h, 1), qc.shape[1], qc.shape[2], kc.shape[3])
    x = scratch.get("dot", shape)
    if h == 0:
        return torch.mul(qc, kc, out=x)[0]
    torch.mul(qc[:h], kc[:h], out=x)
    x[: d - h].addcmul_(qc[h:d], kc[h:d])
    if d < 2 * h:
        x[d - h : h].add_(0.0)
    return _halve(x, h)


def _product_halving(e: torch.Tensor, vb: torch.Tensor, scratch: _Scratch | None = None) -> torch.Tensor:
    """Sum over dim 0 (the keys) of e * vb by ``_halve``'s order: e [m, H, n, 1], vb [m, H,
    1, Dv] -> [H, n, Dv] (a view of scratch memory when ``scratch`` is given). The
    products round, so each is its own multiply, then added."""
    m = e.shape[0]
    shape = (e.shape[1], e.shape[2], vb.shape[3])
    if m == 0:
        return torch.zeros(shape, dtype=e.dtype, device=e.device)
    scratch = scratch or _Scratch(e.device)
    h = (1 << (m - 1).bit_length()) // 2
    x = scratch.get("terms", (max(h, 1), *shape))
    if h == 0:
        return torch.mul(e, vb, out=x)[0]
    torch.mul(e[:h], vb[:h], out=x)
    x[: m - h].add_(torch.mul(e[h:m], vb[h:m], out=scratch.get("upper", (m - h, *shape))))
    if m < 2 * h:
        x[m - h : h].add_(0.0)
    return _halve(x, h)


# float64 elements of the largest temporary of one row chunk of exact_forward_o: on the CPU a
# few of them stay in the 32 MiB L3 of the 2-core box; on a GPU large enough that one chunk's
# ~60 launches are far below its arithmetic (results/input-speed.md)
FORWARD_CHUNK = {"cpu": 1 << 22, "cuda": 1 << 26}


def _forward_chunk(device: torch.device) -> int:
    return FORWARD_CHUNK.get(device.type, FORWARD_CHUNK["cuda"])


def _key_block(lo: int, hi: int) -> tuple[int, int]:
    """The smallest aligned power-of-two block [a, a + 2^m) holding keys [lo, hi)."""
    m = 0
    while (lo >> m) != ((hi - 1) >> m):
        m += 1
    return (lo >> m) << m, 1 << m


def exact_forward_o(
    p: Problem, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sink: torch.Tensor | None
) -> torch.Tensor:
    """O of attention over the given (rounded) tensors in float64, [total_q, heads_q,
    head_dim_v], the same bits on every device: dot products and row sums added by
    halving (``_halve``: a fixed order of correctly rounded additions), exp by
    ``exact_exp``; masks, GQA and sinks as the Problem says; O = 0 for rows that see
    nothing and tail rows.

    The sums are defined over every key of a sequence (masked ones contribute +0 to the
    denominator and a signed zero, 0 * v, to the numerator) zero-padded to a power of two.
    A row chunk only computes the keys some of its rows see: the aligned power-of-two
    block that holds them, whose halving sum equals the whole one (a term that meets
    only zeros on its way up passes through unchanged), except that the sign of a sum
    that comes out exactly 0 depends on the zeros left out. A chunk where such a 0 reaches
    O is computed again over every key; which chunks, the device is asked once, at the end."""
    f64 = torch.float64
    dev = q.device
    q, k, v = q.to(f64), k.to(f64), v.to(f64)
    hq, d, dv = p.heads_q, p.head_dim_qk, p.head_dim_v
    idx = torch.arange(hq, device=dev) // p.group
    o = torch.zeros(p.total_q, hq, dv, dtype=f64, device=dev)
    left, right = p.key_bounds()
    sink64 = None if sink is None else sink.to(f64)
    budget = _forward_chunk(dev)
    scratch = _Scratch(dev)

    def sequence(b):  # sequence b's queries [D, Hq, sq, 1], keys [D, Hq, 1, sk], values [sk, Hq, 1, Dv]
        q0, sq, k0, sk = p.cu_seqlens_q[b], p.seqlens_q[b], p.cu_seqlens_k[b], p.seqlens_k[b]
        return (
            q[q0 : q0 + sq].permute(2, 1, 0).contiguous().unsqueeze(-1),
            k[k0 : k0 + sk][:, idx].permute(2, 1, 0).contiguous().unsqueeze(2),
            v[k0 : k0 + sk][:, idx].unsqueeze(2),
        )

    def rows_of(b, h0, h1, r0, r1, lo, hi, tensors):
        qt, kt, vb = tensors
        out, flag = _forward_rows(
            p,
            qt[:, h0:h1, r0:r1],
            kt[:, h0:h1],
            vb[:, h0:h1],
            r0,
            p.mask_offset(p.seqlens_q[b], p.seqlens_k[b]),
            lo,
            hi,
            None if sink64 is None else sink64[h0:h1].view(-1, 1),
            scratch,
        )
        o[p.cu_seqlens_q[b] + r0 : p.cu_seqlens_q[b] + r1, h0:h1] = out.permute(1, 0, 2)
        return flag

    pending = []  # (b, h0, h1, r0, r1, flag) of the chunks that left keys out
    for b in range(p.batch):
        sq, sk = p.seqlens_q[b], p.seqlens_k[b]
        if sq == 0:
            continue
        off = p.mask_offset(sq, sk)
        tensors = sequence(b)
        width = max(d, dv, 1)
        heads = max(1, min(hq, budget // max(1, sk * width)))
        rows = max(1, budget // max(1, sk * heads * width))
        for h0 in range(0, hq, heads):
            h1 = min(hq, h0 + heads)
            for r0 in range(0, sq, rows):
                r1 = min(sq, r0 + rows)
                lo = 0 if left is None else max(0, r0 + off - left)
                hi = sk if right is None else min(sk, r1 - 1 + off + right)
                flag = rows_of(b, h0, h1, r0, r1, lo, hi, tensors)
                if flag is not None:
                    pending.append((b, h0, h1, r0, r1, flag))
    if pending:  # one wait for the device, not one per chunk
        for i in torch.stack([x[-1] for x in pending]).nonzero().flatten().tolist():
            b, h0, h1, r0, r1, _ = pending[i]
            rows_of(b, h0, h1, r0, r1, 0, p.seqlens_k[b], sequence(b))
    return o


def _forward_rows(p, qt, kt, vb, r0, off, lo, hi, sink, scratch):
    """O of query rows r0.. (qt [D, H, n, 1]) against one sequence's keys (kt [D, H, 1, sk],
    vb [sk, H, 1, Dv]): ([H, n, Dv], flag); keys outside [lo, hi) are masked for every row.
    The sums run over the keys [a, hi) of the key block [a, a + 2^m): the terms past hi are
    the padding's zeros, and hi - a > 2^(m-1), so the halving pairs the same terms. ``flag``
    (a 0-d bool tensor, None when no key was left out): a numerator entry came out exactly 0
    where O keeps its sign (the denominator > 0), so the chunk must be computed again over
    every key (lo = 0, hi = sk)."""
    f64, dev = torch.float64, qt.device
    hc, n, sk = qt.shape[1], qt.shape[2], kt.shape[3]
    if hi <= lo and sink is not None:  # no key seen: O = (0 * v summed) / 1, whose sign every key sets
        lo, hi = 0, sk
    left, right = p.key_bounds()
    a = _key_block(lo, hi)[0] if hi > lo else 0
    e = torch.zeros((max(0, hi - a), hc, n), dtype=f64, device=dev)  # keys [a, hi), H, rows; +0 where masked
    if hi > lo:
        s = _dot_halving(qt, kt[..., lo:hi], scratch).mul_(p.scale)  # [H, n, keys lo..hi]
        rel = torch.arange(lo, hi, device=dev).view(1, -1) - (torch.arange(r0, r0 + n, device=dev).view(-1, 1) + off)
        ok = torch.ones_like(rel, dtype=torch.bool)
        if left is not None:
            ok &= rel >= -left
        if right is not None:
            ok &= rel < right
        s.masked_fill_(~ok, float("-inf"))
        mx = s.amax(dim=-1)  # max: exact in any order
    else:
        mx = torch.full((hc, n), float("-inf"), dtype=f64, device=dev)
    if sink is not None:
        mx = torch.maximum(mx, sink)
    mx = mx.masked_fill_(torch.isinf(mx), 0.0)
    if hi > lo:
        e[lo - a :] = exact_exp(s.sub_(mx.unsqueeze(-1))).permute(2, 0, 1)
    num = _product_halving(e.unsqueeze(-1), vb[a:hi], scratch)
    if sink is None and hi <= lo:  # no key and no sink: O = 0
        return torch.zeros_like(num), None
    denom = _halve(e.clone(), e.shape[0])
    if sink is not None:
        denom = denom + exact_exp(sink - mx)
    whole = lo == 0 and hi == sk
    flag = None if whole else ((num == 0) & (denom > 0).unsqueeze(-1)).any()
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    return torch.where(denom.unsqueeze(-1) > 0, num / safe.unsqueeze(-1), torch.zeros_like(num)), flag
