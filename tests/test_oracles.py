"""The oracles are the ground truth, so they get the hardest checks:

1. the float64 dense reference equals an independent naive implementation written here
   (padded BSHD, explicit per-row masks from problem.key_range, sink as an extra softmax
   column, GQA through an explicit head map), differentiated by torch autograd;
2. its backward passes torch.autograd.gradcheck (finite differences) end to end;
3. the chunked oracle equals the dense one in float64 whatever the chunk size;
4. fully masked rows give O = 0, zero gradients and LSE = -inf;
5. the comparison used here is not vacuous: a problem with the other alignment, a
   flipped sink or another GQA head map is told apart.
"""

import math

import pytest
import torch

from difftest.model.inputs import Inputs, make_inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem
from difftest.oracles import (
    allowed_mask,
    chunk_rows,
    chunked_reference,
    flash_style_reference,
    reference,
    references,
    rows_allowed,
    score_elements,
)
from difftest.oracles.chunked import DEFAULT_MAX_CHUNK_ELEMENTS, auto_chunk_elements, chunk_plan

S = dict(head_dim_qk=6, head_dim_v=5)  # small, with head_dim_v != head_dim_qk

CASES = {
    "no_mask": Problem(batch=2, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, **S),
    "causal_top_left": Problem(
        batch=1, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=2, causal=True, align="top_left", **S
    ),
    "causal_top_left_sq_gt_sk": Problem(batch=1, seqlen_q=7, seqlen_k=4, causal=True, align="top_left", **S),
    "causal_bottom_right_sq_lt_sk": Problem(batch=2, seqlen_q=4, seqlen_k=7, causal=True, **S),
    "causal_bottom_right_sq_gt_sk": Problem(batch=1, seqlen_q=7, seqlen_k=4, heads_q=2, heads_kv=1, causal=True, **S),
    "window_left": Problem(seqlen_q=6, seqlen_k=6, window_left=2, **S),
    "window_right": Problem(seqlen_q=5, seqlen_k=8, window_right=1, **S),
    "window_both_top_left": Problem(seqlen_q=6, seqlen_k=9, window_left=1, window_right=2, align="top_left", **S),
    "window_0_causal": Problem(seqlen_q=6, seqlen_k=6, causal=True, window_left=0, **S),
    "window_0_0": Problem(seqlen_q=4, seqlen_k=6, window_left=0, window_right=0, **S),
    "gqa": Problem(batch=2, seqlen_q=4, seqlen_k=5, heads_q=6, heads_kv=2, causal=True, **S),
    "mqa": Problem(seqlen_q=5, seqlen_k=5, heads_q=4, heads_kv=1, **S),
    "varlen_empty_q_and_k": Problem(
        batch=4, seqlen_q=(3, 0, 5, 2), seqlen_k=(4, 3, 0, 6), heads_q=2, heads_kv=1, causal=True, **S
    ),
    "varlen_all_queries_empty": Problem(batch=2, seqlen_q=(0, 0), seqlen_k=(3, 2), pad_tail=1, **S),
    "sinks": Problem(batch=2, seqlen_q=4, seqlen_k=6, heads_q=4, heads_kv=2, sinks=True, sink_center=0.5, **S),
    "sinks_fully_masked_rows": Problem(seqlen_q=6, seqlen_k=3, causal=True, sinks=True, **S),
    "sinks_varlen_empty_k": Problem(
        batch=2, seqlen_q=(3, 2), seqlen_k=(0, 4), heads_q=2, sinks=True, sink_center=-1.0, window_left=1, **S
    ),
    "fully_masked_rows": Problem(batch=2, seqlen_q=6, seqlen_k=3, causal=True, **S),
    "pad_tail": Problem(
        batch=2, seqlen_q=(3, 4), seqlen_k=(5, 2), pad_tail=3, heads_q=2, heads_kv=1, window_right=0, **S
    ),
    "custom_scale_large_logits": Problem(
        seqlen_q=5, seqlen_k=5, softmax_scale=2.0, values="scaled", value_scale=2.0, **S
    ),
    # softcap near the logits' scale (tanh bends), under GQA, sinks and a causal varlen mask
    "softcap": Problem(seqlen_q=5, seqlen_k=7, softcap=1.5, values="scaled", value_scale=2.0, **S),
    "softcap_gqa_sinks_causal_varlen": Problem(
        batch=2,
        seqlen_q=(4, 3),
        seqlen_k=(6, 2),
        heads_q=4,
        heads_kv=2,
        causal=True,
        sinks=True,
        sink_center=0.5,
        softcap=0.75,
        **S,
    ),
    # ALiBi: slopes that differ per head of a GQA group under a bottom-right causal mask; a
    # varlen batch (the distance per sequence) with top-left alignment, a softcap and sinks;
    # negative, zero and tiny slopes; one large enough that every row is one-hot on its diagonal key
    "alibi_gqa_causal": Problem(
        batch=2, seqlen_q=4, seqlen_k=7, heads_q=4, heads_kv=2, causal=True, alibi_slopes=(0.5, 0.25, 1.5, 0.0625), **S
    ),
    "alibi_varlen_top_left_softcap_sinks": Problem(
        batch=3,
        seqlen_q=(4, 0, 6),
        seqlen_k=(6, 2, 3),
        heads_q=2,
        align="top_left",
        softcap=2.0,
        sinks=True,
        alibi_slopes=(0.75, -0.5),
        **S,
    ),
    "alibi_zero_tiny_negative": Problem(seqlen_q=5, seqlen_k=5, heads_q=3, alibi_slopes=(0.0, 1e-6, -0.3), **S),
    "alibi_one_hot": Problem(seqlen_q=6, seqlen_k=9, alibi_slopes=(1000.0,), **S),
    # a relative-position table: rows that differ inside a GQA group under a bottom-right causal
    # mask, R = 2 so most keys sit on a clamped edge entry; a varlen batch with top-left
    # alignment, a softcap, sinks and ALiBi beside it; R = 0 (one entry per head: a constant)
    "relpos_gqa_causal": Problem(
        batch=2,
        seqlen_q=4,
        seqlen_k=7,
        heads_q=4,
        heads_kv=2,
        causal=True,
        rel_bias=tuple(tuple(0.3 * (h + 1) * (c - 2) + 0.1 * h for c in range(5)) for h in range(4)),
        **S,
    ),
    "relpos_varlen_top_left_softcap_sinks_alibi": Problem(
        batch=3,
        seqlen_q=(4, 0, 6),
        seqlen_k=(6, 2, 3),
        heads_q=2,
        align="top_left",
        softcap=2.0,
        sinks=True,
        alibi_slopes=(0.75, -0.5),
        rel_bias=((1.5, -2.0, 0.5, 3.0, -1.0, 0.0, 2.5), (0.0, 0.25, -0.5, 1.0, 4.0, -3.0, 0.125)),
        **S,
    ),
    "relpos_r0": Problem(seqlen_q=5, seqlen_k=3, heads_q=2, rel_bias=((2.0,), (-7.0,)), **S),
    # a window right of the diagonal; crossed bounds (no key: not full attention)
    "negative_window_left": Problem(seqlen_q=5, seqlen_k=9, window_left=-2, window_right=3, **S),
    "negative_window_right_top_left": Problem(
        seqlen_q=6, seqlen_k=5, window_left=3, window_right=-1, align="top_left", **S
    ),
    "crossed_window": Problem(batch=2, seqlen_q=4, seqlen_k=6, window_left=-3, window_right=1, sinks=True, **S),
}
IDS = list(CASES)


# ------------------------------------------------------------------ independent naive oracle
def naive(p: Problem, q, k, v, do, sink):
    """Padded-BSHD float64 attention written from problem.py's docstring only, with
    gradients from autograd of sum(O * dO). Returns Outputs in the packed layout."""
    B, Hq, Hkv = p.batch, p.heads_q, p.heads_kv
    Sq, Sk = max(p.max_seqlen_q, 1), max(p.max_seqlen_k, 1)
    q, k, v = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    sink_l = None if sink is None else sink.detach().double().requires_grad_(True)
    # pack -> pad
    Q = torch.zeros(B, Sq, Hq, p.head_dim_qk, dtype=torch.float64)
    K = torch.zeros(B, Sk, Hkv, p.head_dim_qk, dtype=torch.float64)
    V = torch.zeros(B, Sk, Hkv, p.head_dim_v, dtype=torch.float64)
    dO = torch.zeros(B, Sq, Hq, p.head_dim_v, dtype=torch.float64)
    visible = torch.zeros(B, Sq, Sk, dtype=torch.bool)
    Q, K, V = Q.clone(), K.clone(), V.clone()
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        Q = Q.index_put((torch.tensor([b]), torch.arange(sq)), q[q0 : q0 + sq])
        K = K.index_put((torch.tensor([b]), torch.arange(sk)), k[k0 : k0 + sk])
        V = V.index_put((torch.tensor([b]), torch.arange(sk)), v[k0 : k0 + sk])
        dO[b, :sq] = do[q0 : q0 + sq].double()
        for i in range(sq):
            lo, hi = p.key_range(i, sq, sk)
            visible[b, i, lo:hi] = True
    head_map = torch.tensor([h * Hkv // Hq for h in range(Hq)])  # query head -> its key/value head
    Kx, Vx = K[:, :, head_map], V[:, :, head_map]
    scores = torch.einsum("bihd,bjhd->bhij", Q, Kx) * p.scale
    if p.softcap is not None:  # capped after the scale, before the mask (problem.py)
        scores = p.softcap * torch.tanh(scores / p.softcap)
    if p.alibi_slopes is not None:  # after the cap, before the mask: -m_h |i + offset - j| per sequence
        bias = torch.zeros(B, Hq, Sq, Sk, dtype=torch.float64)
        for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
            off = sk - sq if p.align == "bottom_right" else 0
            for h, m in enumerate(p.alibi_slopes):
                for i in range(sq):
                    for j in range(sk):
                        bias[b, h, i, j] = -m * abs(i + off - j)
        scores = scores + bias
    if p.rel_bias is not None:  # beside ALiBi's: table[h][clamp(j - (i + offset), -R, R) + R] per sequence
        R = (len(p.rel_bias[0]) - 1) // 2
        bias = torch.zeros(B, Hq, Sq, Sk, dtype=torch.float64)
        for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
            off = sk - sq if p.align == "bottom_right" else 0
            for h, row in enumerate(p.rel_bias):
                for i in range(sq):
                    for j in range(sk):
                        bias[b, h, i, j] = row[min(R, max(-R, j - i - off)) + R]
        scores = scores + bias
    scores = scores.masked_fill(~visible[:, None], -math.inf)
    cols = [scores]
    if sink_l is not None:
        cols.append(sink_l.view(1, Hq, 1, 1).expand(B, Hq, Sq, 1))
    full = torch.cat(cols, dim=-1)
    sees = torch.isfinite(full).any(dim=-1, keepdim=True)
    lse = torch.logsumexp(torch.where(sees, full, torch.zeros_like(full)), dim=-1, keepdim=True)
    prob = torch.where(sees, torch.exp(full - lse), torch.zeros_like(full))[..., :Sk]
    O = torch.einsum("bhij,bjhd->bihd", prob, Vx)
    (O * dO).sum().backward()
    lse_b = torch.where(sees, lse, torch.full_like(lse, -math.inf)).squeeze(-1).transpose(1, 2)  # [B,Sq,Hq]
    o = torch.zeros(p.total_q, Hq, p.head_dim_v, dtype=torch.float64)
    lse_p = torch.full((p.total_q, Hq), -math.inf, dtype=torch.float64)
    for b, sq in enumerate(p.seqlens_q):
        q0 = p.cu_seqlens_q[b]
        o[q0 : q0 + sq] = O[b, :sq].detach()
        lse_p[q0 : q0 + sq] = lse_b[b, :sq].detach()
    return Outputs(o=o, lse=lse_p, dq=q.grad, dk=k.grad, dv=v.grad, dsink=None if sink_l is None else sink_l.grad)


def max_err(a: Outputs, b: Outputs) -> dict:
    """Largest |a - b| per output; -inf/-inf (empty LSE rows) count as equal, a
    mismatch of infinities counts as inf."""
    errs = {}
    for n, ta in a.items():
        tb = b.get(n)
        assert tb is not None, f"{n} missing"
        assert ta.shape == tb.shape, (n, ta.shape, tb.shape)
        ta, tb = ta.double(), tb.double()
        same_inf = torch.isinf(ta) & torch.isinf(tb) & (torch.sign(ta) == torch.sign(tb))
        d = torch.where(same_inf, torch.zeros_like(ta), (ta - tb).abs())
        errs[n] = d.max().item() if d.numel() else 0.0
    return errs


def _naive_of(x: Inputs) -> Outputs:
    return naive(
        x.problem, x.q.double(), x.k.double(), x.v.double(), x.do.double(), None if x.sink is None else x.sink.double()
    )


@pytest.mark.parametrize("name", IDS)
def test_reference_equals_independent_naive(name):
    x = make_inputs(CASES[name])
    ref = reference(x, "float64")
    nv = _naive_of(x)
    errs = max_err(nv, ref)
    assert set(errs) == set(Outputs.shapes(x.problem))
    # lse and dsink are float32 in Outputs; everything else float64
    assert errs.pop("lse") < 1e-5, errs
    if "dsink" in errs:
        assert errs.pop("dsink") < 1e-6 * max(1.0, ref.dsink.abs().max().item()), errs
    assert max(errs.values()) < 1e-12, errs


def _with(x: Inputs, **t) -> Inputs:
    kw = {n: getattr(x, n) for n in Inputs.TENSORS}
    kw.update(t)
    return Inputs(problem=x.problem, **kw)


class _RefAttention(torch.autograd.Function):
    """O = reference(q, k, v, sink).o whose backward is the reference's own backward
    (run with dO = the incoming gradient), so gradcheck checks dq/dk/dv/dsink against
    finite differences of the reference's forward."""

    @staticmethod
    def forward(ctx, q, k, v, sink, x):
        ctx.saved = (q.detach(), k.detach(), v.detach(), None if sink is None else sink.detach(), x)
        with torch.enable_grad():  # the reference runs autograd inside; Function bodies run without grad
            return reference(
                _with(x, q=q.detach(), k=k.detach(), v=v.detach(), sink=None if sink is None else sink.detach()),
                "float64",
            ).o

    @staticmethod
    def backward(ctx, g):
        q, k, v, sink, x = ctx.saved
        with torch.enable_grad():
            r = reference(_with(x, q=q, k=k, v=v, do=g, sink=sink), "float64")
        return r.dq, r.dk, r.dv, (None if sink is None else r.dsink.double()), None


GRADCHECK = [n for n in IDS if n not in ("no_mask", "custom_scale_large_logits")]


@pytest.mark.parametrize("name", GRADCHECK)
def test_reference_backward_passes_gradcheck(name):
    p = CASES[name]
    x = make_inputs(p).upcast(torch.float64)
    if p.sinks:
        # the reference returns dsink as float32: keep dsink checks apart (below)
        x = _with(x, sink=x.sink.double())
    q, k, v = (getattr(x, n).clone().requires_grad_(True) for n in ("q", "k", "v"))
    assert torch.autograd.gradcheck(
        lambda q_, k_, v_: _RefAttention.apply(q_, k_, v_, x.sink, x), (q, k, v), eps=1e-6, atol=1e-6, rtol=1e-4
    )


@pytest.mark.parametrize("name", [n for n in IDS if CASES[n].sinks])
def test_dsink_matches_finite_differences(name):
    """dL/dsink_h for L = sum(O * dO), by central differences on the reference's O."""
    x = make_inputs(CASES[name]).upcast(torch.float64)
    ref = reference(x, "float64")
    eps = 1e-5
    for h in range(x.problem.heads_q):
        lo, hi = x.sink.clone(), x.sink.clone()
        lo[h] -= eps
        hi[h] += eps
        lo_l = (reference(_with(x, sink=lo), "float64").o * x.do).sum().item()
        hi_l = (reference(_with(x, sink=hi), "float64").o * x.do).sum().item()
        fd = (hi_l - lo_l) / (2 * eps)
        assert abs(ref.dsink[h].item() - fd) < 1e-5 * max(1.0, abs(fd)), (h, ref.dsink[h].item(), fd)


def test_dsink_formula_sign_and_reduction():
    """dSink_h = -sum_i P_sink_i * Delta_i, computed independently from O and LSE."""
    x = make_inputs(CASES["sinks"])
    r = reference(x, "float64")
    delta = (x.do.double() * r.o).sum(-1)  # [T, H]
    p_sink = torch.exp(x.sink.double()[None, :] - r.lse.double())
    assert torch.allclose(r.dsink.double(), -(p_sink * delta).sum(0), atol=1e-5, rtol=1e-5)
    assert r.dsink.abs().max().item() > 1e-3  # not trivially zero


# ------------------------------------------------------------------ chunked == dense
@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("chunk", [1, 3, None])
def test_chunked_equals_dense_float64(name, chunk):
    x = make_inputs(CASES[name])
    dense = reference(x, "float64")
    ch = chunked_reference(x, "float64", chunk=chunk)
    errs = max_err(dense, ch)
    assert set(errs) == set(Outputs.shapes(x.problem))
    assert errs.pop("lse") < 1e-6, errs  # float32
    if "dsink" in errs:
        assert errs.pop("dsink") < 1e-6 * max(1.0, dense.dsink.abs().max().item()), errs
    assert max(errs.values(), default=0.0) < 1e-13, errs
    assert ch.o.dtype == torch.float64 and ch.lse.dtype == torch.float32


def test_chunked_float32_close_to_float64():
    x = make_inputs(CASES["gqa"].replace(seqlen_q=40, seqlen_k=50))
    d = chunked_reference(x, "float64")
    f = chunked_reference(x, "float32", chunk=7)
    assert f.dq.dtype == torch.float32
    errs = max_err(d, f)
    assert max(errs.values()) < 1e-5, errs


def test_chunked_many_small_chunks_long_keys():
    """A budget far below one sequence's scores forces single-row chunks."""
    p = Problem(
        batch=2,
        seqlen_q=(70, 33),
        seqlen_k=(90, 120),
        heads_q=4,
        heads_kv=2,
        causal=True,
        window_left=20,
        sinks=True,
        head_dim_qk=8,
        head_dim_v=8,
        pad_tail=2,
    )
    x = make_inputs(p)
    assert chunk_rows(p, 120, max_chunk_elements=100) == 1
    assert chunk_rows(p, 120, max_chunk_elements=4 * 120 * 16) == 16
    ch = chunked_reference(x, max_chunk_elements=4 * 120 * 5)
    errs = max_err(reference(x), ch)
    assert max(errs.values()) < 1e-6, errs


# ------------------------------------------------------------------ block skipping
SKIP_CASES = {
    **CASES,
    "long_causal": Problem(
        seqlen_q=300, seqlen_k=300, heads_q=4, heads_kv=1, causal=True, head_dim_qk=16, head_dim_v=8, dtype="float16"
    ),
    "long_window_varlen": Problem(
        batch=3,
        seqlen_q=(0, 130, 200),
        seqlen_k=(40, 0, 190),
        heads_q=2,
        heads_kv=2,
        window_left=9,
        window_right=4,
        sinks=True,
        head_dim_qk=8,
        head_dim_v=8,
        pad_tail=3,
    ),
    # top-left rows past the last key: their key range starts beyond sk (H200: a band
    # reaching past the keys broke the chunk's score view, "difftest error" on 18 cases)
    "rows_past_the_keys": Problem(
        batch=2,
        seqlen_q=(40, 9),
        seqlen_k=(8, 30),
        heads_q=4,
        heads_kv=1,
        causal=True,
        align="top_left",
        window_left=0,
        sinks=True,
        head_dim_qk=8,
        head_dim_v=8,
    ),
    "window_past_the_keys": Problem(
        seqlen_q=37,
        seqlen_k=6,
        heads_q=2,
        heads_kv=2,
        align="top_left",
        window_left=2,
        window_right=1,
        head_dim_qk=8,
        head_dim_v=8,
    ),
}


def _close_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to GEMM summation order: 8 float64 ulps of the largest element."""
    if a.numel() == 0:
        return b.numel() == 0
    tol = 8 * torch.finfo(torch.float64).eps * max(1.0, a.double().abs().max().item())
    return a.shape == b.shape and bool(((a.double() - b.double()).abs() <= tol).all())


@pytest.mark.parametrize("name", list(SKIP_CASES))
@pytest.mark.parametrize("chunk", [1, 3, None])
def test_block_skipping_gives_the_values_of_the_full_walk(name, chunk):
    """Skipping the fully masked key blocks leaves out exact zeros only: the same LSE bit
    for bit, the same magnitudes, and O/dQ/dK/dV/dSink equal to the last float64 bits
    (a shorter GEMM may add the same terms in another order)."""
    x = make_inputs(SKIP_CASES[name])
    skip = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype="float64")
    full = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype="float64", skip_masked=False)
    assert torch.equal(skip.lse, full.lse)
    for n, t in full.items():
        if n != "lse":
            assert _close_bits(skip.get(n), t), (n, (skip.get(n).double() - t.double()).abs().max().item())
    for n, m in full.magnitude.items():
        assert skip.magnitude[n] == pytest.approx(m, rel=1e-14, abs=1e-300), n


@pytest.mark.parametrize(
    "name",
    [
        "long_causal",
        "long_window_varlen",
        "causal_bottom_right_sq_gt_sk",
        "window_both_top_left",
        "varlen_empty_q_and_k",
        "rows_past_the_keys",
        "window_past_the_keys",
    ],
)
def test_chunk_plan_covers_every_allowed_key_and_skips_the_masked_blocks(name):
    p = SKIP_CASES[name]
    for sq, sk in zip(p.seqlens_q, p.seqlens_k):
        mask = allowed_mask(p, sq, sk)
        for rows in (1, 7, None):
            plan = chunk_plan(p, sq, sk, budget=p.heads_q * 32 * max(1, sk), rows=rows)
            assert [r0 for r0, *_ in plan] == list(range(0, sq, rows or 1))[: len(plan)] or rows is None
            assert sum(r1 - r0 for r0, r1, _, _ in plan) == sq
            inside = torch.zeros_like(mask)
            for r0, r1, lo, hi in plan:
                assert 0 <= lo <= hi <= sk
                inside[r0:r1, lo:hi] = True
            assert not (mask & ~inside).any()  # no allowed score left out


def test_chunk_plan_computes_about_the_causal_half_and_the_window_band():
    s = 4096
    causal = Problem(seqlen_q=s, seqlen_k=s, heads_q=8, heads_kv=8, causal=True, head_dim_qk=128, head_dim_v=128)
    window = causal.replace(causal=False, window_left=100, window_right=20)

    def area(p, **kw):
        return sum((r1 - r0) * (hi - lo) for r0, r1, lo, hi in chunk_plan(p, s, s, DEFAULT_MAX_CHUNK_ELEMENTS, **kw))

    assert area(causal) < 0.55 * s * s  # the masked half is not computed
    assert area(window) < 0.1 * s * s
    assert area(causal, skip_masked=False) == area(window, skip_masked=False) == s * s


def test_chunk_plan_respects_the_element_budget():
    p = SKIP_CASES["long_causal"]
    for budget in (1, 4 * 300, 4 * 300 * 37, 10**9):
        for r0, r1, lo, hi in chunk_plan(p, 300, 300, budget):
            assert r1 - r0 == 1 or p.heads_q * (r1 - r0) * max(1, hi - lo) <= budget
    assert auto_chunk_elements("cpu") == DEFAULT_MAX_CHUNK_ELEMENTS


def test_cuda_chunk_budget_counts_the_allocators_unused_cache(monkeypatch):
    """Memory PyTorch's allocator holds but does not use is free for the truth's chunks: after
    one large truth the cache keeps its blocks (counted as taken by the driver), and the next
    call must plan the same chunks, not smaller ones (on the H200: 61 chunks instead of 32 at 64k)."""
    import difftest.oracles.chunked as chunked

    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (10 * gib, 140 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 100 * gib)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 20 * gib)
    monkeypatch.setattr(chunked, "CUDA_MAX_CHUNK_ELEMENTS", 2**40)
    want = int(90 * gib * chunked.CUDA_FREE_SHARE) // (8 * chunked.LIVE_SCORE_TENSORS)
    assert auto_chunk_elements("cuda") == want
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 20 * gib)  # nothing cached
    assert auto_chunk_elements("cuda") == want // 9


def test_magnitudes_do_not_depend_on_the_chunking():
    """dK/dV/dSink term sums run over every query row, whatever the chunk size."""
    x = make_inputs(SKIP_CASES["long_window_varlen"])
    for mdt, rel in (("float64", 1e-12), ("float32", 1e-5)):
        whole = chunked_reference(x, magnitudes=True, magnitudes_dtype=mdt).magnitude
        for chunk in (1, 5):
            parts = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype=mdt).magnitude
            assert parts == pytest.approx(whole, rel=rel), mdt


MAGNITUDE_CASES = {
    **SKIP_CASES,
    # terms that cancel: |dP| and |Delta| far above dS, the case the magnitudes exist for
    "mixed_do_large_logits": Problem(
        batch=2,
        seqlen_q=70,
        seqlen_k=90,
        heads_q=4,
        heads_kv=2,
        causal=True,
        softmax_scale=1.5,
        values="mixed_do",
        value_scale=3.0,
        sinks=True,
        head_dim_qk=16,
        head_dim_v=8,
    ),
}


@pytest.mark.parametrize("name", list(MAGNITUDE_CASES))
@pytest.mark.parametrize("split", [False, True])
def test_float32_magnitudes_are_the_float64_ones(name, split, monkeypatch):
    """The runner's magnitudes are sums of non-negative terms computed in float32 (TF32 GEMMs
    on CUDA): no cancellation, so they stay within float32 rounding of the float64 sums
    (1e-5 relative here on the CPU), and the values do not depend on the magnitudes' dtype.
    ``split``: dQ/dK's terms formed as on CUDA (P |dP| and |Delta| P apart) or as on the CPU."""
    import difftest.oracles.chunked as chunked

    monkeypatch.setitem(chunked.SPLIT_TERMS, "cpu", split)
    x = make_inputs(MAGNITUDE_CASES[name])
    for chunk in (3, None):
        m64 = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype="float64")
        m32 = chunked_reference(x, chunk=chunk, magnitudes=True)  # the default, as the runner calls it
        assert set(m32.magnitude) == set(m64.magnitude)
        for n, m in m64.magnitude.items():
            assert m32.magnitude[n] == pytest.approx(m, rel=1e-5, abs=1e-300), (n, m32.magnitude[n], m)
        assert (
            max(m64.magnitude.values()) > 0
            or x.problem.total_q == 0
            or max(x.problem.seqlens_q) == 0
            or x.problem.empty_window
        )
        for n, t in m64.items():
            assert torch.equal(t, m32.get(n)), n
    with pytest.raises(ValueError, match="magnitudes_dtype"):
        chunked_reference(x, magnitudes=True, magnitudes_dtype="float16")


def assert_bound_from_above(mag: dict, m64: dict, over: float = 2**-5) -> None:
    """Every magnitude at or above the float64 one (within float64 rounding), at most ``over``
    relative above it, zero exactly where it is zero."""
    assert set(mag) == set(m64)
    for n, m in m64.items():
        assert m * (1 - 1e-12) <= mag[n] <= m * (1 + over), (n, mag[n], m)


@pytest.mark.parametrize("name", list(MAGNITUDE_CASES))
@pytest.mark.parametrize("split", [False, True])
def test_bfloat16_magnitudes_bound_the_float64_ones_from_above(name, split, monkeypatch):
    """CUDA's magnitudes (chunked.MAGNITUDES_DTYPE: P, the terms and |inputs| in bfloat16,
    summed in float32, scaled up by MAGNITUDE_MARGIN) never fall below the float64 sums: a
    budget floor they set is never tighter than the float64 one, and at most 2^-5 looser.
    The values do not depend on the magnitudes' dtype."""
    import difftest.oracles.chunked as chunked

    monkeypatch.setitem(chunked.SPLIT_TERMS, "cpu", split)
    x = make_inputs(MAGNITUDE_CASES[name])
    for chunk in (3, None):
        m64 = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype="float64")
        mb = chunked_reference(x, chunk=chunk, magnitudes=True, magnitudes_dtype="bfloat16")
        assert_bound_from_above(mb.magnitude, m64.magnitude)
        for n, t in m64.items():
            assert torch.equal(t, mb.get(n)), n
    assert chunked.MAGNITUDES_DTYPE == {"cuda": "bfloat16", "cpu": "float32"}


def test_rows_allowed_equals_allowed_mask_slices():
    for p in CASES.values():
        for sq, sk in ((7, 4), (4, 7), (5, 5), (3, 0)):
            full = allowed_mask(p, sq, sk)
            for r0, r1 in ((0, sq), (1, min(3, sq)), (sq - 1, sq)):
                if r0 < 0 or r1 < r0:
                    continue
                assert torch.equal(rows_allowed(p, r0, r1, sq, sk, "cpu"), full[r0:r1])


def test_the_fused_kernels_mask_is_allowed_mask():
    """chunked._mask_spec restates problem.py's key-range rule as the two integers the fused
    GEMM kernel masks with (shifted to the chunk's band, rows repeated per GQA group): for every
    chunk of every problem class, at several chunk sizes, it hides exactly what allowed_mask
    hides, so the rule cannot drift between the dense reference and the kernel."""
    from difftest.oracles.chunked import _mask_spec

    for p in {**CASES, **SKIP_CASES}.values():
        for sq, sk in {*zip(p.seqlens_q, p.seqlens_k), (7, 4), (4, 7), (9, 9)}:
            full = allowed_mask(p, sq, sk)
            for rows in (1, 3, None):
                for r0, r1, lo, hi in chunk_plan(p, sq, sk, 10**9, rows):
                    spec = _mask_spec(p, r0, r1, lo, hi, sq, sk, p.group)
                    want = full[r0:r1, lo:hi].repeat_interleave(p.group, dim=0)
                    got = torch.ones_like(want)
                    if spec is not None:
                        base, group, left, right = spec
                        query = base + torch.arange(want.shape[0]) // group
                        rel = torch.arange(hi - lo).view(1, -1) - query.view(-1, 1)
                        if right is not None:
                            got &= rel < right
                        if left is not None:
                            got &= rel >= -left
                    assert torch.equal(got, want), (p.short(), sq, sk, r0, r1, lo, hi, spec)


def test_dense_and_chunked_truths_agree():
    x = make_inputs(CASES["gqa"])
    n = score_elements(x)
    assert n == sum(a * b for a, b in zip(x.problem.seqlens_q, x.problem.seqlens_k)) * x.problem.heads_q
    dense, chunked = reference(x, "float64"), chunked_reference(x, "float64")
    assert max(max_err(dense, chunked).values()) < 1e-13
    assert dense.o.grad_fn is None and chunked.o.grad_fn is None
    with pytest.raises(ValueError, match="precision"):
        chunked_reference(x, "float16")
    with pytest.raises(ValueError, match="chunk"):
        chunked_reference(x, chunk=0)


def test_references_is_the_one_policy():
    """The float64 chunked truth with magnitudes always; the yardsticks are the naive
    same-dtype reference and the flash-style one; above the threshold the naive one is taken
    in chunks of query rows (with a note), each row's key sum one GEMM as below it."""
    x = make_inputs(CASES["gqa"].replace(dtype="float16"))
    n = score_elements(x)
    small, large = references(x, chunk_threshold=n), references(x, chunk_threshold=n - 1)
    for r in (small, large):
        assert r.truth.o.dtype == torch.float64 and r.truth.magnitude["dq"] > 0
        assert max(max_err(r.truth, chunked_reference(x, "float64")).values()) == 0
        assert r.flash is r.yardsticks[-1] and torch.equal(r.flash.dq, flash_style_reference(x).dq)
    assert len(small.yardsticks) == 2 and small.note == ""
    same = small.yardsticks[0]
    assert torch.equal(same.dq, reference(x, "same").dq) and same.dq.dtype == torch.float16
    assert len(large.yardsticks) == 2 and "chunks of query rows" in large.note
    rows = large.yardsticks[0]
    assert rows.dq.dtype == torch.float16 and torch.equal(rows.o, same.o) and torch.equal(rows.dq, same.dq)
    assert max(max_err(rows, same).values()) <= 2**-9  # dK/dV: chunks' partials added in float32
    assert len(references(x).yardsticks) == 2  # the default threshold is far above this problem
    with pytest.raises(ValueError, match="chunk_threshold"):
        references(x, chunk_threshold=-1)
    # a standard stated against float32: autograd in float32, dense or chunked by the same threshold
    assert small.standard is None and references(x, n, standard="float64").standard is None
    dense32 = references(x, n, standard="float32").standard
    chunked32 = references(x, n - 1, standard="float32").standard
    assert dense32.dq.dtype == chunked32.dq.dtype == torch.float32
    assert torch.equal(dense32.dq, reference(x, "float32").dq)
    assert torch.equal(chunked32.dq, chunked_reference(x, "float32").dq)
    with pytest.raises(ValueError, match="standard"):
        references(x, standard="same")


# ------------------------------------------------------------------ fully masked rows
@pytest.mark.parametrize("oracle", ["dense", "chunked"])
def test_fully_masked_rows_are_zero_with_minus_inf_lse(oracle):
    p = CASES["fully_masked_rows"]  # bottom-right causal, sq=6 > sk=3: rows 0..2 of each sequence see nothing
    x = make_inputs(p)
    r = reference(x) if oracle == "dense" else chunked_reference(x, chunk=2)
    empty = torch.tensor([i % 6 < 3 for i in range(p.total_q)])
    assert torch.isneginf(r.lse[empty]).all() and torch.isfinite(r.lse[~empty]).all()
    assert (r.o[empty] == 0).all() and (r.dq[empty] == 0).all()
    assert r.o[~empty].abs().min().item() > 0 and r.dq[~empty].abs().sum().item() > 0
    for t in r.as_dict().values():
        assert t is None or not torch.isnan(t).any()


def test_sink_rows_with_no_key_see_only_the_sink():
    p = CASES["sinks_fully_masked_rows"]
    x = make_inputs(p)
    for r in (reference(x), chunked_reference(x, chunk=4)):
        # rows 0..2 see no key: LSE = sink, O = 0, zero dq; dSink still gets their (zero-Delta) share
        assert torch.allclose(r.lse[:3], x.sink.expand(3, -1))
        assert (r.o[:3] == 0).all() and (r.dq[:3] == 0).all()


def test_pad_tail_rows_untouched():
    p = CASES["pad_tail"]
    x = make_inputs(p)
    for r in (reference(x), chunked_reference(x, chunk=2)):
        assert (r.o[-3:] == 0).all() and torch.isneginf(r.lse[-3:]).all()
        assert (r.dq[-3:] == 0).all() and (r.dk[-3:] == 0).all() and (r.dv[-3:] == 0).all()


def test_all_queries_empty_gives_zero_gradients():
    x = make_inputs(CASES["varlen_all_queries_empty"])
    for r in (reference(x), chunked_reference(x)):
        assert r.o.shape == (1, 1, 5) and torch.isneginf(r.lse).all()
        assert (r.dk == 0).all() and (r.dv == 0).all() and r.dk.shape == (6, 1, 6)


# ------------------------------------------------------------------ the comparison has teeth
@pytest.mark.parametrize(
    "name,change",
    [
        ("causal_bottom_right_sq_lt_sk", dict(align="top_left")),
        ("window_both_top_left", dict(window_right=1)),
        ("sinks", dict(sink_center=-0.5)),
        ("varlen_empty_q_and_k", dict(seqlen_k=(4, 0, 3, 6))),
    ],
)
def test_naive_comparison_detects_a_different_problem(name, change):
    """The same tensors read under a slightly different problem (other alignment, wider
    window, other sink values, keys split differently) must not pass the comparison."""
    p = CASES[name]
    x = make_inputs(p)
    q = p.replace(**change).validate()
    assert q.total_q == p.total_q and q.total_k == p.total_k
    wrong = reference(Inputs(problem=q, **{n: getattr(x, n) for n in Inputs.TENSORS}))
    if "sink_center" in change:  # sinks are drawn around sink_center: redraw them
        wrong = reference(_with(x, sink=make_inputs(q).sink))
    errs = max_err(_naive_of(x), wrong)
    assert max(errs.values()) > 1e-3, errs


def test_naive_comparison_detects_wrong_gqa_head_map():
    """The GQA mapping is query head h -> key head h // group; using h % heads_kv
    (a real bug class) changes dK/dV measurably."""
    p = CASES["gqa"]
    x = make_inputs(p)
    ref = reference(x)
    perm = torch.tensor([(h % p.heads_kv) * p.group + h // p.heads_kv for h in range(p.heads_q)])
    # head h of the permuted query reads key head perm[h] // group = h % heads_kv
    wrong = reference(_with(x, q=x.q[:, perm], do=x.do[:, perm]))
    assert (wrong.dk - ref.dk).abs().max().item() > 1e-2


# ------------------------------------------------------------------ CUDA
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["gqa", "varlen_empty_q_and_k", "sinks_varlen_empty_k", "pad_tail"])
def test_chunked_on_cuda_equals_dense_on_cpu(name):
    x = make_inputs(CASES[name])
    dense = reference(x, "float64")
    ch = chunked_reference(x.to("cuda"), "float64", chunk=2)
    assert ch.o.device.type == "cuda" and ch.dq.device.type == "cuda"
    errs = max_err(dense, ch.to("cpu"))
    assert errs.pop("lse") < 1e-6 and errs.pop("dsink", 0.0) < 1e-5
    assert max(errs.values()) < 1e-12, errs


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["long_causal", "long_window_varlen", "sinks", "mixed_do_large_logits"])
def test_cuda_truth_as_the_runner_calls_it(name):
    """On CUDA (shift in the GEMM, split terms, bfloat16 magnitude GEMMs): values within 1e-12
    of the dense CPU float64 reference, magnitudes bounding the CPU float64 ones from above
    (within 2^-5), and with float32 magnitudes (TF32 GEMMs) within 2e-3 of them and the TF32
    setting restored afterwards."""
    x = make_inputs(MAGNITUDE_CASES[name])
    before = torch.backends.cuda.matmul.fp32_precision
    ch = chunked_reference(x.to("cuda"), "float64", magnitudes=True)
    tf32 = chunked_reference(x.to("cuda"), "float64", magnitudes=True, magnitudes_dtype="float32")
    assert torch.backends.cuda.matmul.fp32_precision == before
    errs = max_err(reference(x, "float64"), ch.to("cpu"))
    assert errs.pop("lse") < 1e-6 and errs.pop("dsink", 0.0) < 1e-5
    assert max(errs.values()) < 1e-12 * max(1.0, ch.dq.abs().max().item()), errs
    m64 = chunked_reference(x, "float64", magnitudes=True, magnitudes_dtype="float64").magnitude
    assert_bound_from_above(ch.magnitude, m64)
    assert tf32.magnitude == pytest.approx(m64, rel=2e-3, abs=1e-300)


@pytest.mark.parametrize(
    "name", ["long_causal", "long_window_varlen", "sinks", "custom_scale_large_logits", "gqa", "huge_logits"]
)
def test_softmax_shift_in_the_gemm_gives_the_values_of_the_row_maximum(name, monkeypatch):
    """float64 on CUDA takes S - m straight from the QK^T GEMM with m a Cauchy-Schwarz bound
    of the row maximum (oracles/chunked.py, _shift_bound; forced on here), and falls back to the maximum where the
    bound is too far above the scores (here: logits in the thousands). Both ways equal the
    dense reference and the walk that always takes the maximum; each way is really taken."""
    import difftest.oracles.chunked as chunked

    cases = {
        **SKIP_CASES,
        "huge_logits": Problem(
            seqlen_q=40,
            seqlen_k=50,
            heads_q=2,
            heads_kv=1,
            causal=True,
            values="scaled",
            value_scale=40.0,
            sinks=True,
            head_dim_qk=16,
            head_dim_v=8,
        ),
    }
    x = make_inputs(cases[name])
    taken = []
    bounds = chunked._shift_bounds
    monkeypatch.setattr(chunked, "_shift_bounds", lambda *a: taken.extend(bounds(*a)) or taken[-len(a[4]) :])
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", True)  # as on CUDA
    shifted = chunked_reference(x, chunk=7)
    used = sum(t is not None for t in taken)
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", False)
    plain = chunked_reference(x, chunk=7)
    dense = reference(x, "float64")
    for n, t in dense.items():
        tol = (1e-6 if n in ("lse", "dsink") else 1e-13) * max(
            1.0, t.double()[torch.isfinite(t)].abs().max().item() if t.numel() else 1.0
        )
        for other in (shifted, plain):
            assert max_err(Outputs(**{n: t}), Outputs(**{n: other.get(n)}))[n] <= tol, n
    if name == "huge_logits":
        assert used < len(taken)  # the bound is far above the scores: the maximum is taken
    elif x.problem.total_q:
        assert used > 0


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("chunk", [3, None])
def test_the_cuda_configuration_equals_dense_float64(name, chunk, monkeypatch):
    """The choices made per device type (shift in the GEMM, split magnitude terms: on for
    CUDA, off for the CPU) forced to CUDA's here: the values still equal the dense float64
    reference and the magnitudes the CPU configuration's."""
    import difftest.oracles.chunked as chunked

    x = make_inputs(CASES[name])
    cpu = chunked_reference(x, "float64", chunk=chunk, magnitudes=True)
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", True)
    monkeypatch.setitem(chunked.SPLIT_TERMS, "cpu", True)
    ch = chunked_reference(x, "float64", chunk=chunk, magnitudes=True)
    errs = max_err(reference(x, "float64"), ch)
    assert errs.pop("lse") < 1e-6, errs
    if "dsink" in errs:
        assert errs.pop("dsink") < 1e-6 * max(1.0, ch.dsink.abs().max().item()), errs
    assert max(errs.values(), default=0.0) < 1e-13, errs
    assert ch.magnitude == pytest.approx(cpu.magnitude, rel=1e-5, abs=1e-300)


def test_the_cuda_configuration_reads_the_host_once_per_sequence_not_per_chunk(monkeypatch):
    """On a GPU each host read drains the queue before the next chunk's GEMMs are launched:
    the shift decisions of all of a sequence's chunks are read together (one read per
    sequence with keys, one for the magnitudes at the end), however many chunks."""
    import difftest.oracles.chunked as chunked
    from tests.test_gate_reads import HostReads

    p = Problem(
        batch=3,
        seqlen_q=(90, 0, 70),
        seqlen_k=(90, 40, 0),
        heads_q=4,
        heads_kv=2,
        causal=True,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float16",
        sinks=True,
    ).validate()
    x = make_inputs(p)
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", True)
    monkeypatch.setitem(chunked.SPLIT_TERMS, "cpu", True)
    with HostReads() as reads:
        out = chunked_reference(x, "float64", chunk=8, magnitudes=True)
    assert len(chunk_plan(p, 90, 90, 10**9, 8)) == 12
    # the one sequence with queries and keys, and the magnitudes at the end
    assert reads.calls == ["tolist", "tolist"], reads.calls
    dense = reference(x, "float64")
    assert max(max_err(Outputs(dq=dense.dq, dk=dense.dk), Outputs(dq=out.dq, dk=out.dk)).values()) < 1e-13


def test_the_shift_columns_copy_only_the_chunk_s_band_of_k(monkeypatch):
    """The shift inside cuBLAS's Q K^T appends [1, 0...] columns to K. Built for the whole
    sequence it stayed alive through every chunk (1.1 GB at 128k on the H200, where the fused
    GEMMs take nearly every chunk and never read it); now each chunk that takes the path
    builds it for its own band of keys, and the values are unchanged."""
    import difftest.oracles.chunked as chunked

    p = Problem(seqlen_q=96, seqlen_k=96, heads_q=2, heads_kv=2, causal=True, head_dim_qk=16, head_dim_v=16)
    x = make_inputs(p)
    plain = chunked_reference(x, "float64", chunk=16)
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", True)
    widest, cat = [], torch.cat

    def watched(ts, dim=0, **k):
        out = cat(ts, dim, **k)
        if out.dim() == 3 and out.shape[-1] == 16 + chunked.SHIFT_PAD and bool((ts[1] == 1).all()):  # [K, 1, 0...]
            widest.append(out.shape[1])
        return out

    monkeypatch.setattr(torch, "cat", watched)
    shifted = chunked_reference(x, "float64", chunk=16)
    bands = [hi - lo for _, _, lo, hi in chunk_plan(p, 96, 96, 10**9, 16)]
    assert sorted(widest) == sorted(b for b in bands if b) != [96] * len(bands)  # one copy per chunk, its band
    assert max(max_err(plain, shifted).values()) < 1e-13


def _sequence_alone(x: Inputs, b: int) -> Inputs:
    """Sequence ``b`` of ``x`` as a problem of its own (same values)."""
    p = x.problem
    q0, q1, k0, k1 = p.cu_seqlens_q[b], p.cu_seqlens_q[b + 1], p.cu_seqlens_k[b], p.cu_seqlens_k[b + 1]
    one = p.replace(batch=1, seqlen_q=(q1 - q0,), seqlen_k=(k1 - k0,)).validate()  # varlen: a length may be 0
    return Inputs(
        problem=one,
        q=x.q[q0:q1],
        k=x.k[k0:k1],
        v=x.v[k0:k1],
        do=x.do[q0:q1],
        sink=x.sink,
        cu_seqlens_q=torch.tensor([0, q1 - q0], dtype=torch.int32),
        cu_seqlens_k=torch.tensor([0, k1 - k0], dtype=torch.int32),
    )


@pytest.mark.parametrize("cuda_like", [False, True])
def test_every_sequence_of_a_batch_equals_itself_alone(cuda_like, monkeypatch):
    """No sequence of a batch leaks into another: every output row, dSink (summed) and every
    magnitude (their largest) equal what the sequences give one at a time, with repeated,
    interleaved and empty lengths, GQA, sinks, a causal window, and the CUDA configuration
    forced on or off."""
    import difftest.oracles.chunked as chunked

    p = Problem(
        batch=5,
        seqlen_q=(5, 3, 5, 0, 3),
        seqlen_k=(6, 4, 6, 2, 4),
        heads_q=4,
        heads_kv=2,
        causal=True,
        window_left=3,
        sinks=True,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="bfloat16",
    ).validate()
    x = make_inputs(p)
    monkeypatch.setitem(chunked.SHIFT_IN_GEMM, "cpu", cuda_like)
    monkeypatch.setitem(chunked.SPLIT_TERMS, "cpu", cuda_like)
    whole = chunked_reference(x, "float64", chunk=2, magnitudes=True)
    alone = [chunked_reference(_sequence_alone(x, b), "float64", chunk=2, magnitudes=True) for b in range(p.batch)]
    cq, ck = p.cu_seqlens_q, p.cu_seqlens_k
    for n, cu in (("o", cq), ("lse", cq), ("dq", cq), ("dk", ck), ("dv", ck)):
        got = whole.get(n)
        for b, one in enumerate(alone):
            part = got[cu[b] : cu[b + 1]]
            assert torch.allclose(part, one.get(n), rtol=1e-13, atol=1e-15, equal_nan=True), (n, b)
    assert torch.allclose(whole.dsink, sum(one.dsink for one in alone), rtol=1e-6, atol=1e-9)
    for n in ("o", "dq", "dk", "dv"):
        assert whole.magnitude[n] == pytest.approx(max(one.magnitude[n] for one in alone), rel=1e-12)
    # dSink's terms add up over the sequences before their largest is taken
    each = [one.magnitude["dsink"] for one in alone]
    assert max(each) * (1 - 1e-12) <= whole.magnitude["dsink"] <= sum(each) * (1 + 1e-12)


def test_masked_chunks_keep_between_min_and_max_skip_rows():
    """A masked problem's chunks follow its mask (at least SKIP_CHUNKS per sequence) but
    stop growing at MAX_SKIP_ROWS rows: on the H200 larger chunks only widened the band
    (64k causal: 1.02 s at 2048 rows per chunk, 1.11 s at 4096). An unmasked one takes what the budget allows."""
    from difftest.oracles import chunked

    causal = Problem(seqlen_q=65536, seqlen_k=65536, causal=True, head_dim_qk=8, head_dim_v=8)
    plan = chunk_plan(causal, 65536, 65536, 2**40)
    assert max(r1 - r0 for r0, r1, _, _ in plan) == chunked.MAX_SKIP_ROWS == 2048 and len(plan) == 32
    mid = chunk_plan(causal.replace(seqlen_q=2000, seqlen_k=2000), 2000, 2000, 2**40)
    assert len(mid) == chunked.SKIP_CHUNKS and max(r1 - r0 for r0, r1, _, _ in mid) == 125
    short = chunk_plan(causal.replace(seqlen_q=300, seqlen_k=300), 300, 300, 2**40)
    assert max(r1 - r0 for r0, r1, _, _ in short) == chunked.MIN_SKIP_ROWS == 64
    dense = causal.replace(causal=False)
    assert chunk_plan(dense, 65536, 65536, 2**40) == [(0, 65536, 0, 65536)]


def test_softcap_and_crossed_windows_are_told_apart():
    """Not vacuous: the capped truth differs from the uncapped one, and a crossed window
    (left + right < 0) gives empty rows (O 0, LSE -inf, zero dQ/dK/dV) where full attention
    would not."""
    x = make_inputs(CASES["softcap"])
    capped, plain = reference(x), reference(make_inputs(CASES["softcap"].replace(softcap=None)))
    assert max_err(capped, plain)["dq"] > 1e-3
    crossed = chunked_reference(make_inputs(CASES["crossed_window"]), "float64")  # sinks: LSE of the sink alone
    assert crossed.o.abs().max() == 0 and crossed.dq.abs().max() == 0
    assert crossed.dk.abs().max() == 0 and crossed.dv.abs().max() == 0
    no_sinks = CASES["crossed_window"].replace(sinks=False)
    out = chunked_reference(make_inputs(no_sinks), "float64")
    assert torch.isneginf(out.lse).all() and out.o.abs().max() == 0


def test_alibi_changes_the_truth_and_a_dominant_slope_makes_rows_one_hot():
    """Not vacuous: the biased truth differs from the unbiased one, and a slope of 1000 puts
    all of a row's weight on its diagonal key (i + seqlen_k - seqlen_q): O is that key's V."""
    p = CASES["alibi_gqa_causal"]
    assert max_err(reference(make_inputs(p)), reference(make_inputs(p.replace(alibi_slopes=None))))["dq"] > 1e-2
    x = make_inputs(CASES["alibi_one_hot"])
    out = chunked_reference(x, "float64")
    diagonal = torch.arange(6) + 3
    assert torch.allclose(out.o[:, 0], x.v[diagonal, 0].double(), atol=1e-12)


def test_the_relative_position_table_changes_the_truth_and_a_dominant_entry_decides_the_row():
    """Not vacuous: the biased truth differs from the unbiased one, and from the one whose GQA
    group shares the key head's row; an entry of 1000 at distance 0 (every other entry 0) puts all
    of a row's weight on its diagonal key (i + seqlen_k - seqlen_q): O is that key's V."""
    p = CASES["relpos_gqa_causal"]
    truth = reference(make_inputs(p))
    assert max_err(truth, reference(make_inputs(p.replace(rel_bias=None))))["dq"] > 1e-2
    kv_rows = tuple(p.rel_bias[h // p.group] for h in range(p.heads_q))
    assert max_err(truth, reference(make_inputs(p.replace(rel_bias=kv_rows))))["o"] > 1e-3
    one_hot = Problem(seqlen_q=6, seqlen_k=9, rel_bias=((0.0, 0.0, 1000.0, 0.0, 0.0),), **S)
    x = make_inputs(one_hot)
    out = chunked_reference(x, "float64")
    assert torch.allclose(out.o[:, 0], x.v[torch.arange(6) + 3, 0].double(), atol=1e-12)
