"""Dense autograd reference: every Problem feature, in a chosen precision.

``reference(inputs, precision)``:
  "float64"  the truth: inputs (already rounded to the Problem dtype) upcast to float64;
  "float32"  the same in float32;
  "same"     computed in the Problem's own dtype, to measure how much error rounding
             alone makes (the error budget's yardstick, as FlashAttention's tests do).
Gradients come from torch autograd of a plain softmax(QK^T) V, one sequence at a time
(with ``Problem.softcap``, softmax(softcap * tanh(scale QK^T / softcap)) V; with
``Problem.alibi_slopes`` or ``Problem.rel_bias``, the bias ``score_bias`` added after the cap,
before the mask).

``rows_reference(inputs, precision, max_elements)``: the same computation, its query rows
taken in chunks of at most ``max_elements`` scores, so a long problem's naive yardstick fits
in memory. Each row still sums its keys in one GEMM over the whole key sequence, on the
inputs' device: the order, and so the rounding, of the device's own GEMM over long rows
(an SGEMM over 1,458 near-equal float32 terms errs 4x the CPU BLAS's on an H100). dK, dV and
dSink, summed over query rows, add the chunks' partial sums in float32.
"""

import torch

from difftest.errors import InputError
from difftest.model.inputs import Inputs, torch_dtype
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

PRECISIONS = ("float64", "float32", "same")


def allowed_mask(problem: Problem, sq: int, sk: int, device="cpu", rows: tuple[int, int] | None = None) -> torch.Tensor:
    """[sq, sk] bool: query i may attend key j (``Problem.key_bounds``: the rule, and
    ``Problem.sparsity``'s selected blocks); with
    ``rows=(r0, r1)`` only query rows r0..r1-1, without building the full mask."""
    r0, r1 = rows if rows is not None else (0, sq)
    i = torch.arange(r0, r1, device=device).unsqueeze(1) + problem.mask_offset(sq, sk)
    rel = torch.arange(sk, device=device).unsqueeze(0) - i  # j - (i + offset)
    ok = torch.ones(r1 - r0, sk, dtype=torch.bool, device=device)
    left, right = problem.key_bounds()
    if left is not None:
        ok &= rel >= -left
    if right is not None:
        ok &= rel < right
    if problem.sparsity is not None:  # block-sparse / top-k: only the selected key blocks
        ok &= problem.sparsity.allowed(sq, sk, device, (r0, r1))
    return ok


def score_bias(
    problem: Problem,
    sq: int,
    sk: int,
    device="cpu",
    dtype=torch.float64,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
) -> torch.Tensor | None:
    """[heads_q, rows, keys]: the score bias of one (sq, sk) sequence (Problem's module docstring),
    rows r0..r1-1 with ``rows``, keys c0..c1-1 with ``cols``; None without one. ALiBi's
    -slope_h * |i + offset - j| plus the relative-position table's entry
    table[h][clamp(j - (i + offset), -R, R) + R]. The float32 slopes times the integer distance
    (plus the float32 entry) in float64 for the truth; in float32 for every other ``dtype`` (as a
    kernel forms it, then cast to ``dtype``)."""
    if not problem.biased:
        return None
    r0, r1 = rows if rows is not None else (0, sq)
    c0, c1 = cols if cols is not None else (0, sk)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    i = torch.arange(r0, r1, device=device, dtype=torch.int64).unsqueeze(1) + problem.mask_offset(sq, sk)
    rel = torch.arange(c0, c1, device=device, dtype=torch.int64).unsqueeze(0) - i  # j - (i + offset)
    bias = torch.zeros(problem.heads_q, r1 - r0, c1 - c0, dtype=work, device=device)
    if problem.alibi_slopes is not None:
        slopes = torch.tensor(problem.alibi_slopes, dtype=work, device=device).view(-1, 1, 1)
        bias -= slopes * rel.abs().to(work)
    if problem.rel_bias is not None:
        r = problem.rel_distance
        table = torch.tensor(problem.rel_bias, dtype=work, device=device)  # [Hq, 2R + 1]
        bias += table[:, (rel.clamp(-r, r) + r)]  # [Hq, rows, keys]
    return bias.to(dtype)


def capped(s: torch.Tensor, softcap: float | None, tanh=torch.tanh) -> torch.Tensor:
    """The logits ``s`` (already times the softmax scale) capped: softcap * tanh(s / softcap)
    (Problem's module docstring); ``s`` itself when softcap is None. Autograd gives the
    backward's factor 1 - tanh^2. ``tanh``: another tanh of a design's (oracles/approx_tanh.py)."""
    return s if softcap is None else tanh(s / softcap) * softcap


def probabilities(q, kx, sink, allowed, scale, softcap=None, tanh=torch.tanh, bias=None):
    """(P [Hq, sq, sk], the row shift m, the row sums) of one sequence: q [sq,Hq,D] against
    kx [sk,Hq,D] (K already per query head), sink [Hq] or None, ``bias`` [Hq, sq, sk] (ALiBi's and/or the
    relative-position table's, ``score_bias``) or None; rows that see nothing get P = 0."""
    s = capped(torch.einsum("qhd,khd->hqk", q, kx) * scale, softcap, tanh)  # capped before the mask
    if bias is not None:  # after the cap, before the mask (FlashAttention 2's order)
        s = s + bias
    # also for an unmasked problem: masked_fill's result is contiguous where the product may not
    # be, and the reductions below add in another order on another layout (other last bits)
    s = s.masked_fill(~allowed.unsqueeze(0), float("-inf"))
    m = (
        s.detach().amax(dim=-1, keepdim=True)
        if s.shape[-1]
        else torch.full((*s.shape[:2], 1), float("-inf"), dtype=s.dtype, device=s.device)
    )
    if sink is not None:
        m = torch.maximum(m, sink.detach().view(-1, 1, 1).to(s.dtype))
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    if sink is not None:
        denom = denom + torch.exp(sink.view(-1, 1, 1).to(s.dtype) - m)
    safe = torch.where(denom == 0, 1.0, denom)
    return e / safe, m, denom


def _attention(q, k, v, sink, allowed, scale, group, softcap=None, tanh=torch.tanh, bias=None):
    """One sequence. q [sq,Hq,D], k [sk,Hkv,D], v [sk,Hkv,Dv], sink [Hq] or None, bias
    [Hq,sq,sk] or None. Returns o [sq,Hq,Dv] and lse [sq,Hq] (float32-able, -inf for empty rows)."""
    kx = k.repeat_interleave(group, dim=1)
    vx = v.repeat_interleave(group, dim=1)
    p, m, denom = probabilities(q, kx, sink, allowed, scale, softcap, tanh, bias)
    o = torch.einsum("hqk,khd->qhd", p, vx)
    lse = (m + torch.log(denom.detach())).squeeze(-1).transpose(0, 1)
    return o, lse


def reference(inputs: Inputs, precision: str = "float64", tanh=torch.tanh) -> Outputs:
    """Every output by autograd through the dense formula, in ``precision`` ("same": the
    problem's dtype); ``tanh`` caps the logits of a softcapped problem."""
    if precision not in PRECISIONS:
        raise InputError(f"precision={precision!r}: allowed {PRECISIONS}")
    p = inputs.problem
    dt = torch_dtype(p.dtype) if precision == "same" else getattr(torch, precision)
    x = inputs.upcast(dt)
    q = x.q.detach().clone().requires_grad_(True)
    k = x.k.detach().clone().requires_grad_(True)
    v = x.v.detach().clone().requires_grad_(True)
    sink = None
    if x.sink is not None:
        sink = x.sink.detach().to(dt).clone().requires_grad_(True)
    o = torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=dt, device=q.device)
    lse = torch.full((p.total_q, p.heads_q), float("-inf"), dtype=torch.float32, device=q.device)
    outs = []
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0:
            continue
        ob, lb = _attention(
            q[q0 : q0 + sq],
            k[k0 : k0 + sk],
            v[k0 : k0 + sk],
            sink,
            allowed_mask(p, sq, sk, q.device),
            p.scale,
            p.group,
            p.softcap,
            tanh,
            score_bias(p, sq, sk, q.device, dt),
        )
        outs.append((q0, sq, ob))
        lse[q0 : q0 + sq] = lb.float()
    if not outs:
        # No query row anywhere (every query sequence empty): nothing attends, so every
        # gradient is zero. autograd has no graph to walk here, so build them directly.
        return Outputs(
            o=o,
            lse=lse,
            dq=torch.zeros_like(q),
            dk=torch.zeros_like(k),
            dv=torch.zeros_like(v),
            dsink=None if sink is None else torch.zeros_like(sink).float(),
        )
    o = torch.cat([o[: outs[0][0]]] + _interleave(o, outs, p.total_q), dim=0)
    o.backward(x.do.to(dt))
    return Outputs(
        o=o.detach(),
        lse=lse,
        dq=q.grad,
        dk=k.grad,
        dv=v.grad,
        dsink=None if sink is None else sink.grad.float(),
    )


def _interleave(zeros, pieces, total):
    """Rebuild the packed output from per-sequence pieces (keeps autograd intact)."""
    parts, pos = [], pieces[0][0]
    for q0, sq, ob in pieces:
        if q0 > pos:
            parts.append(zeros[pos:q0])
        parts.append(ob)
        pos = q0 + sq
    if pos < total:
        parts.append(zeros[pos:total])
    return parts


def rows_reference(inputs: Inputs, precision: str = "same", max_elements: int = 2**22) -> Outputs:
    """``reference`` with each sequence's query rows in chunks of at most ``max_elements``
    scores (module docstring)."""
    if precision not in PRECISIONS:
        raise InputError(f"precision={precision!r}: allowed {PRECISIONS}")
    p = inputs.problem
    dt = torch_dtype(p.dtype) if precision == "same" else getattr(torch, precision)
    acc = torch.float32 if dt.itemsize < 4 else dt  # the chunks' partial dK/dV/dSink
    x = inputs.upcast(dt)
    dev = x.q.device
    o = torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=dt, device=dev)
    lse = torch.full((p.total_q, p.heads_q), float("-inf"), dtype=torch.float32, device=dev)
    dq = torch.zeros_like(x.q)
    dk = torch.zeros(x.k.shape, dtype=acc, device=dev)
    dv = torch.zeros(x.v.shape, dtype=acc, device=dev)
    dsink = None if x.sink is None else torch.zeros(p.heads_q, dtype=torch.float32, device=dev)
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        rows = max(1, max_elements // max(1, sk * p.heads_q))
        for r0 in range(0, sq, rows):
            r1 = min(sq, r0 + rows)
            q = x.q[q0 + r0 : q0 + r1].detach().clone().requires_grad_(True)
            k = x.k[k0 : k0 + sk].detach().clone().requires_grad_(True)
            v = x.v[k0 : k0 + sk].detach().clone().requires_grad_(True)
            sink = None if x.sink is None else x.sink.detach().to(dt).clone().requires_grad_(True)
            ob, lb = _attention(
                q,
                k,
                v,
                sink,
                allowed_mask(p, sq, sk, dev, rows=(r0, r1)),
                p.scale,
                p.group,
                p.softcap,
                bias=score_bias(p, sq, sk, dev, dt, rows=(r0, r1)),
            )
            leaves = [q, k, v] + ([sink] if sink is not None else [])
            grads = torch.autograd.grad(ob, leaves, x.do[q0 + r0 : q0 + r1].to(dt), allow_unused=True)
            o[q0 + r0 : q0 + r1] = ob.detach()
            lse[q0 + r0 : q0 + r1] = lb.float()
            for buf, g, at in (
                (dq, grads[0], slice(q0 + r0, q0 + r1)),
                (dk, grads[1], slice(k0, k0 + sk)),
                (dv, grads[2], slice(k0, k0 + sk)),
            ):
                if g is not None:
                    buf[at] += g.to(buf.dtype)
            if sink is not None and grads[3] is not None:
                dsink += grads[3].float()
    return Outputs(o=o, lse=lse, dq=dq, dk=dk.to(dt), dv=dv.to(dt), dsink=dsink)
