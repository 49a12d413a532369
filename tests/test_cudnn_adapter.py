"""The cuDNN SDPA adapter (kernels/cudnn.py).

CPU part: it imports and registers without nvidia-cudnn-frontend, reports itself unavailable
with a reason (and a case is a clean skip), its mask translation matches difftest's masking
rule, and its refusals agree with its capability. GPU part (marker ``gpu``): forward and
backward against the float64 reference on a few shapes, one per feature the capability claims.
"""

import importlib.util

import pytest
import torch

from difftest.execute import adapter as registry
from difftest.execute.adapter import KernelUnavailable
from difftest.judge.runner import RunConfig, run_case
from difftest.kernels import cudnn as ck
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference

HAVE_CUDNN_FE = importlib.util.find_spec("cudnn") is not None


def cuda_ready() -> bool:
    return torch.cuda.is_available() and HAVE_CUDNN_FE


def P(**kw):
    base = dict(seqlen_q=64, seqlen_k=64, heads_q=2, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16")
    return Problem(**(base | kw))


# ---------------------------------------------------------------- registry and availability
@pytest.mark.parametrize("name", ["cudnn", "cudnn-fast"])
def test_registered_with_the_cuda_capability(name):
    k = registry.get(name)
    assert k.name == name
    assert k.capability.device == "cuda"
    assert k.capability.deterministic == (name == "cudnn")


@pytest.mark.skipif(cuda_ready(), reason="checks the behaviour without CUDA or cudnn-frontend")
def test_unavailable_is_a_clean_skip():
    k = registry.get("cudnn")
    why = k.available()
    assert why and ("CUDA" in why or "cudnn" in why)
    res = run_case(k, P(), RunConfig())
    assert res.status == "skipped" and res.reason


@pytest.mark.skipif(HAVE_CUDNN_FE, reason="checks the behaviour without nvidia-cudnn-frontend")
def test_missing_frontend_raises_kernel_unavailable():
    with pytest.raises(KernelUnavailable, match="cudnn-frontend"):
        ck._cudnn()


# ---------------------------------------------------------------- mask translation
def visible_from_bounds(p: Problem, sq: int, sk: int) -> torch.Tensor:
    """cuDNN's band, written from its reference's rule: masked iff j <= i + off - left_bound or
    j > i + off + right_bound, off = sk - sq for BOTTOM_RIGHT, 0 for TOP_LEFT."""
    left, right = ck.bounds(p)
    off = sk - sq if p.align == "bottom_right" else 0
    i = torch.arange(sq).view(-1, 1)
    j = torch.arange(sk).view(1, -1)
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if right is not None:
        ok &= j <= i + off + right
    if left is not None:
        ok &= j > i + off - left
    return ok


MASKS = [dict(causal=True), dict(causal=True, align="top_left"), dict(window_left=3, window_right=0),
         dict(window_left=0, window_right=5), dict(window_left=7), dict(window_right=2, align="top_left"),
         dict(causal=True, window_left=4), dict(causal=True, window_right=3), dict(window_left=2, window_right=9)]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("sq,sk", [(16, 16), (9, 30), (30, 9)])
def test_bounds_match_difftests_masking_rule(mask, sq, sk):
    p = P(seqlen_q=sq, seqlen_k=sk, **mask)
    want = torch.zeros(sq, sk, dtype=torch.bool)
    for i in range(sq):
        lo, hi = p.key_range(i, sq, sk)
        want[i, lo:hi] = True
    assert torch.equal(visible_from_bounds(p, sq, sk), want)


def test_a_wrong_left_bound_is_caught():
    # left_bound = window_left (one short) would hide the oldest key of each window
    p = P(seqlen_q=16, seqlen_k=16, window_left=3, window_right=0)
    right = ck.bounds(p)[1]
    assert ck.bounds(p)[0] == 4 and right == 0
    wrong = P(seqlen_q=16, seqlen_k=16, window_left=2, window_right=0)
    assert not torch.equal(visible_from_bounds(wrong, 16, 16), visible_from_bounds(p, 16, 16))


def test_padding_mask_only_where_cudnn_needs_it():
    assert not ck.needs_padding_mask(P(seqlen_q=64, seqlen_k=32))  # unmasked s_q > s_kv
    assert not ck.needs_padding_mask(P(seqlen_q=64, seqlen_k=32, causal=True, align="top_left"))
    assert ck.needs_padding_mask(P(seqlen_q=64, seqlen_k=32, causal=True))  # bottom-right
    assert ck.needs_padding_mask(P(seqlen_q=64, seqlen_k=32, window_left=4, align="top_left"))
    assert not ck.needs_padding_mask(P(seqlen_q=32, seqlen_k=64, causal=True))
    assert ck.needs_padding_mask(P(batch=2, seqlen_q=(3, 5), seqlen_k=(4, 4)))


# ---------------------------------------------------------------- capability and refusals
def test_capability_states_the_contract():
    cap = registry.get("cudnn").capability
    assert cap.dtypes == ("float16", "bfloat16")
    assert cap.head_dims_qk == tuple(range(8, 257, 8)) and cap.v_dims == cap.head_dims_qk
    assert not cap.equal_head_dims and cap.gqa and cap.sinks and cap.varlen and cap.empty_seqs
    assert set(cap.aligns) == {"top_left", "bottom_right"}
    assert cap.excludes(P(dtype="float32"))
    assert cap.excludes(P(head_dim_qk=260, head_dim_v=64))
    assert cap.excludes(P(head_dim_qk=20, head_dim_v=20))
    assert cap.covers(P(head_dim_qk=192, head_dim_v=128, heads_q=8, heads_kv=2))


@pytest.mark.parametrize("p,refused", [
    (P(seqlen_q=1, seqlen_k=1), True),
    (P(seqlen_q=1, seqlen_k=7), False),
    (P(seqlen_q=1, seqlen_k=7, sinks=True), True),
    (P(seqlen_q=2, seqlen_k=7, sinks=True), False),
    (P(batch=2, seqlen_q=(1, 0), seqlen_k=(1, 1)), True),
    (P(batch=2, seqlen_q=(1, 2), seqlen_k=(1, 1)), False),
])
def test_refusals_are_inside_the_capability_and_named(p, refused):
    cap = registry.get("cudnn").capability
    assert cap.covers(p)  # the refusal covers what the capability's fields cannot say
    why = ck.refusal(p)
    assert bool(why) == refused
    if why:
        assert ".h:" in why  # cites the line of cudnn-frontend that refuses it


def test_refusal_is_a_skip_not_an_error_through_get():
    a = ck.CudnnAdapter()
    with pytest.raises(KernelUnavailable, match="s_q == s_kv == 1"):
        a._get(P(seqlen_q=1, seqlen_k=1))


def test_graph_key_separates_what_changes_a_graph():
    a, b = P(causal=True), P(causal=True, align="top_left", seqlen_q=32)
    assert ck.graph_key(a, True) != ck.graph_key(b, True)
    assert ck.graph_key(a, True) != ck.graph_key(a, False)
    # varlen graphs depend on the longest sequence and the buffers, not on each length
    v1 = P(batch=2, seqlen_q=(3, 5), seqlen_k=(5, 3))
    v2 = P(batch=2, seqlen_q=(5, 3), seqlen_k=(3, 5))
    assert ck.graph_key(v1, True) == ck.graph_key(v2, True)


# ---------------------------------------------------------------- GPU
GPU_CASES = [
    P(),
    P(dtype="bfloat16", causal=True, seqlen_q=100, seqlen_k=37, align="top_left"),
    P(causal=True, seqlen_q=77, seqlen_k=129),
    P(causal=True, seqlen_q=129, seqlen_k=77),  # bottom-right with s_q > s_kv: padding mask
    P(window_left=16, window_right=3, seqlen_q=200, seqlen_k=200),
    P(heads_q=8, heads_kv=2, head_dim_qk=192, head_dim_v=128, causal=True),
    P(sinks=True, causal=True, seqlen_q=90, seqlen_k=90),
    P(batch=3, seqlen_q=(17, 0, 64), seqlen_k=(30, 5, 64), causal=True, pad_tail=3),
    P(batch=2, seqlen_q=(40, 7), seqlen_k=(40, 70), heads_q=4, heads_kv=1, sinks=True, window_left=8),
]


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_ready(), reason="needs CUDA and nvidia-cudnn-frontend")
@pytest.mark.parametrize("p", GPU_CASES, ids=lambda p: p.describe() if hasattr(p, "describe") else None)
def test_gpu_matches_float64_reference(p):
    k = ck.CudnnAdapter()
    inputs = make_inputs(p, "cuda")
    got = k.run(inputs)
    ref = reference(make_inputs(p, "cpu"))
    tol = 2e-2 if p.dtype == "bfloat16" else 4e-3
    for name in ("o", "lse", "dq", "dk", "dv") + (("dsink",) if p.sinks else ()):
        g, r = getattr(got, name).double().cpu(), getattr(ref, name).double()
        both_inf = torch.isinf(g) & torch.isinf(r) & (torch.sign(g) == torch.sign(r))
        err = torch.where(both_inf, torch.zeros_like(g), (g - r).abs())
        scale = r[torch.isfinite(r)].abs().max().clamp_min(1.0) if torch.isfinite(r).any() else 1.0
        assert float(err.max()) <= tol * float(scale), (name, float(err.max()), float(scale))
    assert k.compile_seconds and all(s > 0 for s in k.compile_seconds)
