"""Shrinking: planted faults, one per bug class (kernels/mutants.py's BUG_CLASSES), are found by problems()
and shrunk to the smallest Problem that still shows them, within a time bound.

Each planted kernel is the float64 reference plus one targeted corruption (a test-only
adapter, so the same kernels can run through a campaign). Hypothesis is driven directly
with ``hypothesis.find``; the truth is ``oracles.reference.reference`` in float64.
"""

import time

import pytest
import torch
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

from difftest.execute.adapter import KernelAdapter
from difftest.model.inputs import Inputs, make_inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem
from difftest.oracles.reference import allowed_mask, reference
from difftest.search.shrinking import simplify
from difftest.strategies import problems
from tests.kernels_for_tests import full_capability

CAP = full_capability(
    dtypes=("float32", "float16"),
    head_dims_qk=(16, 32),
    max_batch=4,
    max_seqlen=128,
    max_heads=4,
    block_m=64,
    block_n=64,
)
BLOCK = CAP.block_n


# ---------------------------------------------------------------- planted kernels
_TRUTH: dict = {}  # id(inputs) -> (inputs, its float64 reference), while fails() checks those inputs


def _reference(inputs: Inputs) -> Outputs:
    """``reference(inputs, "float64")``; a copy of the one fails() computed already when these
    are the very inputs it checks (the kernel's and the truth's references are one computation)."""
    known = _TRUTH.get(id(inputs))
    if known is not None and known[0] is inputs:
        return known[1].clone()
    return reference(inputs, "float64")


def gqa_mapping(inputs: Inputs) -> Outputs:
    """Query head h reads key/value head h % heads_kv instead of h // group."""
    p = inputs.problem
    idx = torch.tensor([h % p.heads_kv for h in range(p.heads_q)])
    wide = Inputs(
        problem=p.replace(heads_kv=p.heads_q),
        q=inputs.q,
        k=inputs.k[:, idx],
        v=inputs.v[:, idx],
        do=inputs.do,
        sink=inputs.sink,
        cu_seqlens_q=inputs.cu_seqlens_q,
        cu_seqlens_k=inputs.cu_seqlens_k,
    )
    out = reference(wide, "float64")
    dk = torch.zeros_like(inputs.k, dtype=out.dk.dtype).index_add_(1, idx, out.dk)
    dv = torch.zeros_like(inputs.v, dtype=out.dv.dtype).index_add_(1, idx, out.dv)
    return Outputs(o=out.o, lse=out.lse, dq=out.dq, dk=dk, dv=dv, dsink=out.dsink)


def causal_alignment(inputs: Inputs) -> Outputs:
    """Forward masks bottom-right (correct); backward always masks top-left."""
    good = _reference(inputs)
    p = inputs.problem
    bwd = reference(Inputs(**{**inputs.__dict__, "problem": p.replace(align="top_left")}), "float64")
    return Outputs(o=good.o, lse=good.lse, dq=bwd.dq, dk=bwd.dk, dv=bwd.dv, dsink=bwd.dsink)


def tail_block(inputs: Inputs) -> Outputs:
    """The last key tile is never written when it is partial and not the first tile."""
    out = _reference(inputs)
    p = inputs.problem
    for b, sk in enumerate(p.seqlens_k):
        if sk > BLOCK and sk % BLOCK:
            k0 = p.cu_seqlens_k[b] + (sk // BLOCK) * BLOCK
            out.dk[k0 : p.cu_seqlens_k[b + 1]] = 0
            out.dv[k0 : p.cu_seqlens_k[b + 1]] = 0
    return out


def empty_key_sequence(inputs: Inputs) -> Outputs:
    """Rows of a sequence with no keys divide 0 by 0 instead of writing O = 0."""
    out = _reference(inputs)
    p = inputs.problem
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        if sk == 0 and sq:
            out.o[p.cu_seqlens_q[b] : p.cu_seqlens_q[b + 1]] = float("nan")
    return out


def sink_sign(inputs: Inputs) -> Outputs:
    """dSink with the wrong sign."""
    out = _reference(inputs)
    if out.dsink is not None:
        out.dsink = -out.dsink
    return out


def naive_softmax(inputs: Inputs) -> Outputs:
    """Forward in float32 without subtracting the row maximum: exp() overflows (or every
    term underflows) once logits leave float32's exp range. Gradients are correct."""
    out = _reference(inputs)
    p = inputs.problem
    x = inputs.upcast(torch.float32)
    o = torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=torch.float32)
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if not sq:
            continue
        k = x.k[k0 : k0 + sk].repeat_interleave(p.group, dim=1)
        v = x.v[k0 : k0 + sk].repeat_interleave(p.group, dim=1)
        s = torch.einsum("qhd,khd->hqk", x.q[q0 : q0 + sq], k) * p.scale
        e = torch.exp(s) * allowed_mask(p, sq, sk)
        den = e.sum(-1, keepdim=True)
        if x.sink is not None:
            den = den + torch.exp(x.sink).view(-1, 1, 1)
        visible = allowed_mask(p, sq, sk).any(-1).view(1, sq, 1) | (x.sink is not None)
        den = torch.where(visible, den, torch.ones_like(den))  # fully masked rows: O = 0, not a fault
        o[q0 : q0 + sq] = torch.einsum("hqk,khd->qhd", e / den, v)
    out.o = o.double()
    return out


def tail_and_gqa(inputs: Inputs) -> Outputs:
    """dK of the last key wrong, only once keys cross a tile and heads are grouped."""
    out = _reference(inputs)
    p = inputs.problem
    if p.group > 1 and p.max_seqlen_k > BLOCK:
        out.dk = out.dk * 1.5
    return out


class Planted(KernelAdapter):
    """A test-only adapter around one planted kernel."""

    def __init__(self, fn, capability=CAP):
        self.fn, self.name, self.capability = fn, f"planted-{fn.__name__}", capability

    def forward(self, inputs, out=None):
        res = self.fn(inputs)
        return res, res

    def backward(self, inputs, fwd, ctx, out=None):
        return ctx


# ---------------------------------------------------------------- driving Hypothesis
def differs(got: Outputs, truth: Outputs) -> bool:
    for name, t in truth.items():
        g = got.get(name)
        if g is None:
            continue
        g, t = g.double(), t.double()
        if not torch.equal(torch.isnan(g), torch.isnan(t)):
            return True
        fin = torch.isfinite(t) & torch.isfinite(g)
        if not torch.equal(torch.isfinite(g), torch.isfinite(t)):
            return True
        if fin.any():
            scale = t[fin].abs().max().item()
            if (g[fin] - t[fin]).abs().max().item() > 1e-6 + 1e-4 * scale:
                return True
    return False


def shrink(fn, capability=CAP, profile="quick", max_examples=500):
    """The minimal Problem (Hypothesis, then difftest.search.shrinking) on which ``fn`` differs."""
    kernel = Planted(fn, capability)

    def fails(p: Problem) -> bool:
        x = make_inputs(p)
        truth = reference(x, "float64")
        _TRUTH[id(x)] = (x, truth)
        try:
            return differs(kernel.run(x), truth)
        finally:
            _TRUTH.pop(id(x), None)

    t0 = time.perf_counter()
    p = find(
        problems(capability, profile),
        fails,
        settings=settings(
            max_examples=max_examples,
            database=None,
            derandomize=True,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )  # each example runs 2 references
    # Hypothesis's shrinker can stall in a local minimum that depends on its seed (which
    # derandomize takes from the test's source and path): difftest finishes the shrink
    p, _ = simplify(p, fails, capability)
    secs = time.perf_counter() - t0
    print(f"\n{fn.__name__}: shrunk to {p.short()} (seed {p.seed}) in {secs:.1f}s")
    assert fails(p)
    return p


def assert_minimal_rest(p: Problem, *, batch=1, heads=(1, 1), values="normal", sinks=False):
    assert p.batch == batch, p.short()
    assert (p.heads_q, p.heads_kv) == heads, p.short()
    assert p.values == values and p.value_scale == 1.0, p.short()
    assert p.sinks is sinks, p.short()
    assert p.head_dim_qk == p.head_dim_v == 16 and p.dtype == "float32", p.short()
    assert p.softmax_scale is None and p.pad_tail == 0 and p.seed == 0, p.short()


# ---------------------------------------------------------------- the faults
@pytest.mark.slow
def test_fault_needing_a_tile_crossing_and_grouped_heads_shrinks_to_the_smallest_such():
    p = shrink(tail_and_gqa)
    assert not p.varlen and p.seqlen_k == BLOCK + 1 and p.seqlen_q == 1, p.short()
    assert p.group == 2, p.short()
    assert_minimal_rest(p, heads=(2, 1))
    assert not p.masked


def test_empty_key_sequence_shrinks_to_one_query_and_no_keys():
    p = shrink(empty_key_sequence)
    assert p.varlen and p.seqlen_q == (1,) and p.seqlen_k == (0,), p.short()
    assert_minimal_rest(p)


def test_gqa_head_mapping_shrinks_to_two_groups_of_two():
    p = shrink(gqa_mapping)
    assert not p.varlen and (p.seqlen_q, p.seqlen_k) == (1, 1), p.short()
    assert_minimal_rest(p, heads=(4, 2))
    assert not p.masked


@pytest.mark.slow
def test_causal_alignment_shrinks_to_one_query_two_keys():
    p = shrink(causal_alignment)
    assert p.causal and p.align == "bottom_right" and p.window_left is None and p.window_right is None, p.short()
    # one query against two keys (or two against one); the shrinker may keep an empty
    # extra varlen sequence around it, which adds no tokens
    assert {p.total_q, p.total_k} == {1, 2} and p.size() == 2 * 16, p.short()
    assert p.batch <= 2 and all(a * b == 0 or {a, b} == {1, 2} for a, b in zip(p.seqlens_q, p.seqlens_k))
    assert_minimal_rest(p, batch=p.batch)


@pytest.mark.slow
def test_tail_block_shrinks_to_one_tile_plus_one_key():
    p = shrink(tail_block)
    assert not p.varlen and p.seqlen_k == BLOCK + 1 and p.seqlen_q == 1, p.short()
    assert_minimal_rest(p)
    assert not p.masked


def test_sink_sign_shrinks_to_one_token_with_a_sink():
    p = shrink(sink_sign)
    assert not p.varlen and (p.seqlen_q, p.seqlen_k) == (1, 1), p.short()
    assert_minimal_rest(p, sinks=True)
    assert p.sink_center == 0.0 and not p.masked


@pytest.mark.slow
def test_large_logit_overflow_shrinks_to_one_token_with_large_values():
    p = shrink(naive_softmax)
    assert p.batch == 1 and p.heads_q == 1 and max(p.max_seqlen_q, p.max_seqlen_k) <= 2, p.short()
    assert p.values != "normal" or p.softmax_scale is not None, p.short()
    # the fault is real: standard-normal values on the same shape pass
    normal = p.replace(values="normal", value_scale=1.0, softmax_scale=None)
    x = make_inputs(normal)
    assert not differs(naive_softmax(x), reference(x, "float64"))


def test_correct_kernel_is_never_reported():
    """The planted-fault harness does not itself fail: the uncorrupted reference passes."""
    kernel = Planted(lambda x: reference(x, "float64"))
    with pytest.raises(NoSuchExample):
        find(
            problems(CAP, "quick"),
            lambda p: differs(kernel.run(make_inputs(p)), reference(make_inputs(p))),
            settings=settings(max_examples=60, database=None, derandomize=True, deadline=None),
        )


@pytest.mark.slow
def test_campaign_shrinks_the_planted_fault_through_the_engine(tmp_path):
    """The same fault through difftest.search.campaign (runner, gates, reproducer): ~25 s."""
    from difftest.search.campaign import run_campaign

    res = run_campaign(
        Planted(tail_and_gqa),
        "quick",
        max_examples=200,
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        time_budget=60,
        shrink_budget=60,
    )
    assert res.failed, res.status
    p = res.failure.problem
    assert (p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv) == (1, 1, BLOCK + 1, 2, 1), p.short()
    assert "dk:budget" in res.failure.failed_gates


def test_domain_shrinking_drops_the_softcap_and_negative_sides_unless_the_fault_needs_them():
    start = Problem(
        batch=2,
        seqlen_q=9,
        seqlen_k=14,
        heads_q=2,
        heads_kv=1,
        causal=True,
        window_left=-3,
        window_right=-1,
        softcap=0.05,
        values="scaled",
        value_scale=4.0,
        seed=5,
    )
    anything, _ = simplify(start, lambda q: True)
    assert anything.softcap is None and not anything.masked, anything.short()
    capped, _ = simplify(start, lambda q: q.softcap is not None)
    assert capped.softcap == 0.05 and not capped.masked and capped.batch == 1, capped.short()
    crossed, _ = simplify(start, lambda q: q.empty_window)
    assert crossed.softcap is None and crossed.empty_window and not crossed.causal, crossed.short()
    # a fault of the bound, not of its sign: the negative side goes to 0 (simpler, still crossed)
    assert (crossed.window_left, crossed.window_right) in ((-1, None), (-1, 0), (0, -1), (None, -1)), crossed.short()


def test_domain_shrinking_drops_alibi_then_its_per_head_slopes_unless_the_fault_needs_them():
    start = Problem(batch=2, seqlen_q=9, seqlen_k=14, heads_q=4, heads_kv=2, alibi_slopes=(0.5, 2.0, -0.25, 1e-6))
    anything, _ = simplify(start, lambda q: True)
    assert not anything.alibi and anything.heads_q == 1, anything.short()
    biased, _ = simplify(start, lambda q: q.alibi)
    assert biased.alibi_slopes == (0.5,), biased.short()  # one head, its first slope
    per_head, _ = simplify(start, lambda q: q.alibi and len(set(q.alibi_slopes[: q.group])) > 1)
    assert per_head.heads_q == 2 and per_head.heads_kv == 1 and per_head.alibi_slopes == (0.5, 2.0), per_head.short()


def test_domain_shrinking_drops_the_table_then_its_per_head_rows_and_its_reach_unless_the_fault_needs_them():
    rows = ((1.0, 2.0, 3.0, 4.0, 5.0), (-1.0, 0.5, 0.0, 8.0, 2.0), (0.0,) * 5, (7.0, 0.0, 0.0, 0.0, -7.0))
    start = Problem(batch=2, seqlen_q=9, seqlen_k=14, heads_q=4, heads_kv=2, rel_bias=rows)
    anything, _ = simplify(start, lambda q: True)
    assert not anything.rel and anything.heads_q == 1, anything.short()
    biased, _ = simplify(start, lambda q: q.rel)
    assert biased.rel_bias == ((3.0,),), biased.short()  # one head, R = 0: its first row's centre
    per_head, _ = simplify(start, lambda q: q.rel and len(set(q.rel_bias[: q.group])) > 1)
    assert per_head.heads_q == 2 and per_head.heads_kv == 1 and per_head.rel_distance == 0, per_head.short()
    assert per_head.rel_bias == ((3.0,), (0.0,)), per_head.short()
    edge, _ = simplify(start, lambda q: q.rel and q.rel_distance >= 2)
    assert edge.rel_distance == 2 and edge.heads_q == 1, edge.short()
