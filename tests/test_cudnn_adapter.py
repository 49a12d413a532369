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
from difftest.model.capability import Capability
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference

HAVE_CUDNN_FE = importlib.util.find_spec("cudnn") is not None


def cuda_ready() -> bool:
    return torch.cuda.is_available() and HAVE_CUDNN_FE


def P(**kw):
    base = dict(seqlen_q=64, seqlen_k=64, heads_q=2, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16")
    return Problem(**(base | kw))


GPU_CASES = [
    P(),
    P(dtype="bfloat16", causal=True, seqlen_q=100, seqlen_k=37, align="top_left"),
    P(causal=True, seqlen_q=77, seqlen_k=129),
    P(causal=True, seqlen_q=129, seqlen_k=77),  # bottom-right with s_q > s_kv: padding mask
    P(window_left=16, window_right=3, seqlen_q=200, seqlen_k=200),
    P(heads_q=8, heads_kv=2, head_dim_qk=192, head_dim_v=128, causal=True),
    P(sinks=True, causal=True, seqlen_q=90, seqlen_k=90),
    P(batch=3, seqlen_q=(17, 1, 64), seqlen_k=(30, 5, 64), causal=True, pad_tail=3),
    P(batch=2, seqlen_q=(40, 7), seqlen_k=(40, 70), heads_q=4, heads_kv=1, window_left=8, align="top_left"),
    P(seqlen_q=1, seqlen_k=33),
    P(seqlen_q=5, seqlen_k=1),
    P(head_dim_qk=8, head_dim_v=24),
]


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


MASKS = [
    dict(causal=True),
    dict(causal=True, align="top_left"),
    dict(window_left=3, window_right=0),
    dict(window_left=0, window_right=5),
    dict(window_left=7),
    dict(window_right=2, align="top_left"),
    dict(causal=True, window_left=4),
    dict(causal=True, window_right=3),
    dict(window_left=2, window_right=9),
]


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
    assert not cap.equal_head_dims and cap.gqa and cap.sinks and cap.varlen
    assert not cap.empty_seqs  # cuDNN < 9.25 (the H200's 9.19): zero-length sequences are not served
    assert cap.excludes(P(batch=2, seqlen_q=(3, 0), seqlen_k=(0, 2)))
    assert set(cap.aligns) == {"top_left", "bottom_right"}
    assert cap.excludes(P(dtype="float32"))
    assert cap.excludes(P(head_dim_qk=260, head_dim_v=64))
    assert cap.excludes(P(head_dim_qk=20, head_dim_v=20))
    assert cap.covers(P(head_dim_qk=192, head_dim_v=128, heads_q=8, heads_kv=2))


@pytest.mark.parametrize(
    "p,refused",
    [
        (P(seqlen_q=1, seqlen_k=1), True),
        (P(seqlen_q=1, seqlen_k=7), False),
        (P(seqlen_q=1, seqlen_k=7, sinks=True), True),
        (P(seqlen_q=2, seqlen_k=7, sinks=True), False),
        (P(batch=2, seqlen_q=(1, 1), seqlen_k=(1, 1)), True),
        (P(batch=2, seqlen_q=(1, 2), seqlen_k=(1, 1)), False),
        (P(batch=2, seqlen_q=(3, 2), seqlen_k=(4, 1), sinks=True), True),
    ],
)
def test_refusals_are_what_the_capability_adds_to_its_fields(p, refused):
    cap = registry.get("cudnn").capability
    assert Capability.excludes(cap, p) is None  # the fields alone cover it
    why = ck.refusal(p)
    assert bool(why) == refused
    assert cap.excludes(p) == why  # so a campaign skips exactly these, with the reason
    if why:
        assert ".h:" in why or "results/bugs" in why  # names the line (or the report) behind it


def test_narrowing_keeps_the_refusals():
    cap = registry.get("cudnn").capability.narrowed(max_seqlen=64)
    assert isinstance(cap, ck.CudnnCapability)
    assert cap.excludes(P(seqlen_q=1, seqlen_k=1))


def test_gpu_cases_are_inside_the_capability():
    cap = registry.get("cudnn").capability
    for p in GPU_CASES:
        assert cap.excludes(p) is None, p


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


# ---------------------------------------------------------------- graph construction (a recording stand-in)
class _T:
    """A graph tensor that records what the adapter sets on it."""

    def __init__(self, **kw):
        self.kw = dict(kw)

    def __getattr__(self, name):
        if name.startswith("set_"):

            def setter(value):
                self.kw[name[4:]] = value
                return self

            return setter
        raise AttributeError(name)


class _Graph:
    def __init__(self, log, **kw):
        self.log = log

    def tensor(self, **kw):
        t = _T(**kw)
        self.log.setdefault("tensors", []).append(t)
        return t

    def sdpa(self, **kw):
        self.log["sdpa"] = kw
        self.log["sdpa_out"] = (_T(name="o"), _T(name="stats"))
        return self.log["sdpa_out"]

    def sdpa_backward(self, **kw):
        self.log["sdpa_backward"] = kw
        return _T(name="dq"), _T(name="dk"), _T(name="dv")

    def get_workspace_size(self):
        return 0

    def __getattr__(self, name):  # validate, build_operation_graph, create_execution_plans, ...
        return lambda *a, **k: None


class _Fake:
    class data_type:
        HALF, BFLOAT16, FLOAT, INT32, INT64 = "half", "bf16", "f32", "i32", "i64"

    class diagonal_alignment:
        TOP_LEFT, BOTTOM_RIGHT = "TL", "BR"

    class heur_mode:
        A, FALLBACK = "A", "F"

    def __init__(self):
        self.logs = []

    def pygraph(self, **kw):
        self.logs.append({})
        return _Graph(self.logs[-1], **kw)


def built(p):
    fake = _Fake()
    ck._Graphs(fake, None, p, True)
    fwd, bwd = fake.logs
    return fwd, bwd


def test_dense_backward_reads_packed_bhsd_stats():
    # cuDNN < 9.26 reads a non-ragged Stats input correctly only as packed BHSD
    # (scaled_dot_product_flash_attention.h:1570-1585): B, H, S, 1 with strides H*S, S, 1, 1
    p = P(batch=3, heads_q=4, heads_kv=2, seqlen_q=10, seqlen_k=12)
    fwd, bwd = built(p)
    stats_in = bwd["sdpa_backward"]["stats"].kw
    assert stats_in["dim"] == (3, 4, 10, 1) and stats_in["stride"] == (40, 10, 1, 1)
    stats_out = fwd["sdpa_out"][1].kw  # the forward writes the buffer the backward reads
    assert stats_out["dim"] == (3, 4, 10, 1) and stats_out["stride"] == (40, 10, 1, 1)
    assert "ragged_offset" not in stats_out and stats_out["output"] is True


def test_varlen_graph_is_ragged_with_the_padding_mask_and_buffer_totals():
    p = P(batch=2, seqlen_q=(5, 3), seqlen_k=(2, 7), pad_tail=2, causal=True)
    fwd, bwd = built(p)
    kw = bwd["sdpa_backward"]
    assert kw["use_padding_mask"] and kw["max_total_seq_len_q"] == 10 and kw["max_total_seq_len_kv"] == 11
    for name in ("q", "k", "v", "o", "dO", "stats"):
        assert "ragged_offset" in kw[name].kw, name
    assert kw["stats"].kw["stride"] == (5 * 2, 1, 2, 1)  # [T, H] memory
    assert fwd["sdpa"]["use_padding_mask"] and fwd["sdpa"]["diagonal_band_right_bound"] == 0


@pytest.mark.parametrize(
    "kw,left,right,align",
    [
        (dict(causal=True), None, 0, "BR"),
        (dict(causal=True, align="top_left"), None, 0, "TL"),
        (dict(window_left=3, window_right=5), 4, 5, "BR"),
        (dict(window_left=0), 1, None, "BR"),
    ],
)
def test_masks_reach_both_graphs(kw, left, right, align):
    fwd, bwd = built(P(**kw))
    for call in (fwd["sdpa"], bwd["sdpa_backward"]):
        assert call["diagonal_band_left_bound"] == left and call["diagonal_band_right_bound"] == right
        assert call["diagonal_alignment"] == align
        assert call["attn_scale"] == P(**kw).scale


def test_sinks_reach_both_graphs_and_dsink_is_an_output():
    fwd, bwd = built(P(sinks=True, seqlen_q=9, seqlen_k=9))
    assert fwd["sdpa"]["sink_token"].kw["dim"] == (1, 2, 1, 1)
    ds = bwd["sdpa_backward"]["dSink_token"]
    assert ds.kw["dim"] == (1, 2, 1, 1) and ds.kw.get("output") is True
    assert bwd["sdpa_backward"]["use_deterministic_algorithm"] is True
