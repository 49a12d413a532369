"""flex-dynamic (kernels/flex_dynamic.py) on the CPU: its forward gives flex's outputs, and its
tensor translation of the constants flex captures as Python numbers (scale, causal/align,
window bounds, softcap, the sink column) is difftest's rule (kernels/masking.py, the float64
truth). FlexAttention has no CPU backward, so the gradients need a GPU; the backward is
flex's own (``FlexAdapter.backward`` over the same ctx). Its compile key: test_flex_compile_key.py.
"""

import math
from dataclasses import replace

import pytest
import torch
import torch._functorch.config

from difftest.execute import adapter as registry
from difftest.kernels.flex import FlexAdapter, compiled_flex
from difftest.kernels.flex_dynamic import (
    NO_BOUND,
    FlexDynamicAdapter,
    compiled_flex_dynamic,
    constants,
    make_mask_mod,
    make_score_mod,
)
from difftest.kernels.masking import visible_keys
from difftest.model.inputs import lay_out, make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference
from tests.test_gpu_adapters import FLEX_CASES, max_err
from tests.test_sparsity import FLEX_CASES as SPARSE_CASES

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
D = dict(head_dim_qk=16, head_dim_v=16)
SPEC = "difftest.kernels.flex_dynamic:FlexDynamicAdapter"
CASES = [
    *FLEX_CASES,
    Problem(batch=2, seqlen_q=9, seqlen_k=14, heads_q=2, heads_kv=2, softmax_scale=0.3, causal=True, **D),
    Problem(seqlen_q=12, seqlen_k=12, heads_q=4, heads_kv=1, softcap=30.0, layout="kv_broadcast", **D),
    Problem(batch=2, seqlen_q=(3, 8), seqlen_k=(8, 3), window_left=None, window_right=2, softcap=2.5, **D),
]


def allowed(p: Problem) -> torch.Tensor:
    """The packed [queries, keys (+ the sink column)] mask of difftest's rule."""
    sink = int(p.sinks)
    m = torch.zeros(p.total_q, p.total_k + sink, dtype=torch.bool)
    if not p.varlen:
        m = torch.zeros(p.seqlen_q, p.seqlen_k + sink, dtype=torch.bool)
        m[:, : p.seqlen_k] = visible_keys(p, p.seqlen_q, p.seqlen_k)
        m[:, p.seqlen_k :] = True
        return m
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        m[q0 : q0 + sq, k0 : k0 + sk] = visible_keys(p, sq, sk)
        if sink:
            m[q0 : q0 + sq, p.total_k] = True
    return m


def evaluate(p: Problem, b: int = 0) -> torch.Tensor:
    mm, n_keys, _ = make_mask_mod(p)
    lq, lk = (p.total_q if p.varlen else p.seqlen_q), n_keys + int(p.sinks)
    qi = torch.arange(lq).view(-1, 1).expand(lq, lk)
    ki = torch.arange(lk).view(1, -1).expand(lq, lk)
    return mm(torch.tensor(b), torch.tensor(0), qi, ki)


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_forward_gives_flex_outputs_and_the_truth(p):
    x = lay_out(make_inputs(p.validate()))
    want, _ = FlexAdapter().translate(x, grad=False)
    got, ctx = FlexDynamicAdapter().translate(x, grad=False)
    truth = reference(make_inputs(p), "float64")
    used = p.total_q - p.pad_tail
    for g, w, t in ((got.o, want.o, truth.o), (got.lse, want.lse, truth.lse)):
        assert g.shape == w.shape
        assert max_err(g, w) < 1e-6  # flex's own translation, up to rounding
        assert max_err(g[:used], t[:used]) < 1e-4
    assert len(ctx) == 6  # flex's ctx: FlexAdapter.backward serves


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.short())
def test_mask_mod_is_the_problem_rule(p):
    assert torch.equal(evaluate(p), allowed(p))


def test_a_wrong_alignment_or_window_would_be_caught():
    p = Problem(seqlen_q=5, seqlen_k=9, causal=True, align="bottom_right", **D)
    assert not torch.equal(evaluate(p), allowed(p.replace(align="top_left")))
    w = Problem(seqlen_q=9, seqlen_k=9, window_left=2, window_right=-1, **D)
    assert not torch.equal(evaluate(w), allowed(w.replace(window_left=3)))


def test_constants_are_the_problem_numbers():
    p = Problem(seqlen_q=8, seqlen_k=8, softmax_scale=0.3, window_left=-2, window_right=None, softcap=2.5, **D)
    c = constants(p)
    assert float(c["scale"]) == pytest.approx(0.3) and float(c["softcap"]) == 2.5
    assert int(c["window_left"]) == -2 and int(c["window_right"]) == NO_BOUND
    assert not bool(c["causal"]) and bool(c["bottom_right"]) and not bool(c["varlen"])
    d = constants(p.replace(softmax_scale=None, softcap=None, window_left=None, causal=True, align="top_left"))
    assert float(d["scale"]) == pytest.approx(1 / math.sqrt(16)) and float(d["softcap"]) == 0.0
    assert int(d["window_left"]) == NO_BOUND and bool(d["causal"]) and not bool(d["bottom_right"])


def test_score_mod_scales_caps_and_places_the_sink():
    """flex_attention(scale=1.0) hands score_mod the raw logit: the score_mod scales it, then caps
    it (``cap * tanh(s / cap)``, none at 0), and the sink column takes the sink logit uncapped."""
    s = torch.tensor([-40.0, -0.7, 0.3, 40.0])
    p = Problem(seqlen_q=8, seqlen_k=8, softmax_scale=0.5, softcap=1.5, **D)
    mod = make_score_mod(constants(p), None, 8)
    assert torch.allclose(mod(s, 0, 0, 0, torch.tensor(0)), 1.5 * torch.tanh(0.5 * s / 1.5))
    plain = make_score_mod(constants(p.replace(softcap=None)), None, 8)
    assert torch.equal(plain(s, 0, 0, 0, torch.tensor(0)), s * 0.5)
    sink = torch.tensor([3.0, -1.0])
    with_sink = make_score_mod(constants(p), sink, 8)
    assert torch.equal(with_sink(s, 0, 1, 0, torch.tensor(8)), torch.full_like(s, -1.0))
    assert torch.allclose(with_sink(s, 0, 1, 0, torch.tensor(7)), 1.5 * torch.tanh(0.5 * s / 1.5))


def test_score_mod_subtracts_alibi_after_the_cap_and_nothing_at_zero_slopes():
    """ALiBi's term is ``slope[h] * |diagonal[q] - position[k]|``, after the cap (flex's order); a
    problem without ALiBi runs the same score_mod with zero slopes, which changes no bit."""
    s = torch.tensor([-40.0, -0.7, 0.3, 40.0])
    p = Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=2, softmax_scale=0.5, softcap=1.5, **D)
    diagonal, k_pos = torch.tensor([5.0]), torch.tensor([2.0, 9.0])
    a = p.replace(alibi_slopes=(0.25, 0.5))
    mod = make_score_mod(constants(a), None, 8, positions=(diagonal, k_pos))
    capped = 1.5 * torch.tanh(0.5 * s / 1.5)
    assert torch.allclose(mod(s, 0, 1, torch.tensor(0), torch.tensor(1)), capped - 0.5 * 4.0)
    assert torch.allclose(mod(s, 0, 0, torch.tensor(0), torch.tensor(0)), capped - 0.25 * 3.0)
    none = make_score_mod(constants(p), None, 8, positions=(diagonal, k_pos))
    plain = make_score_mod(constants(p), None, 8)
    assert torch.equal(
        none(s, 0, 1, torch.tensor(0), torch.tensor(1)), plain(s, 0, 1, torch.tensor(0), torch.tensor(1))
    )


REL_ROWS = ((1.5, -1.0, 0.5, 2.0, -2.5), (-0.5, 0.25, 3.0, -1.0, 0.0))
REL_CASES = [
    # per-head rows under GQA with a bottom-right causal mask, R = 2 (most keys on an edge entry)
    Problem(seqlen_q=9, seqlen_k=30, heads_q=2, heads_kv=1, causal=True, rel_bias=REL_ROWS, **D),
    # a varlen batch (the distance per sequence) top-left, a softcap, sinks, ALiBi beside the table
    Problem(
        batch=2,
        seqlen_q=(5, 20),
        seqlen_k=(20, 7),
        heads_q=2,
        heads_kv=2,
        align="top_left",
        softcap=2.0,
        sinks=True,
        alibi_slopes=(0.25, 0.5),
        rel_bias=REL_ROWS,
        **D,
    ),
    # the widest table and R = 0, one entry dominating the logits
    Problem(seqlen_q=40, seqlen_k=40, rel_bias=(tuple(0.1 * (x - 16) for x in range(33)),), **D),
    Problem(seqlen_q=6, seqlen_k=11, heads_q=2, heads_kv=2, rel_bias=((200.0,), (-3.0,)), dtype="bfloat16", **D),
]


@pytest.mark.parametrize("p", REL_CASES, ids=lambda p: p.short())
def test_forward_adds_the_relative_position_table_as_the_truth_does(p):
    """The table is a captured [heads_q, 33] tensor looked up at the clamped signed distance: the
    forward is the truth's (flex has no table to compare with), and not the table-less one's."""
    x = lay_out(make_inputs(p.validate()))
    got, _ = FlexDynamicAdapter().translate(x, grad=False)
    truth = reference(make_inputs(p), "float64")
    tol = 1e-4 if p.dtype == "float32" else 2e-2
    assert max_err(got.o, truth.o) < tol and max_err(got.lse, truth.lse) < tol
    bare = reference(make_inputs(p.replace(rel_bias=None)), "float64")
    assert max_err(got.lse, bare.lse) > 0.1


def test_the_padded_table_is_the_clamped_one_and_zeros_without_a_table():
    """Entry d + 16 of a padded row is the table's entry at clamp(d, -R, R): widening to R = 16
    changes no lookup, so R is no graph difference; no table is a zero one (adds nothing)."""
    p = Problem(heads_q=2, heads_kv=2, rel_bias=REL_ROWS, **D)
    t = constants(p)["rel"]
    assert t.shape == (2, 33)
    for h in range(2):
        for d in range(-16, 17):
            assert float(t[h, d + 16]) == pytest.approx(p.rel_bias[h][min(2, max(-2, d)) + 2])
    assert torch.equal(constants(p.replace(rel_bias=None))["rel"], torch.zeros(2, 33))


def test_softcap_gradient_of_an_uncapped_score_is_exact():
    """The capped branch is evaluated on a safe divisor, so an uncapped problem's gradient
    through ``where`` is the scale alone (no NaN from the discarded branch)."""
    s = torch.tensor([-40.0, 0.3, 40.0], requires_grad=True)
    mod = make_score_mod(constants(Problem(seqlen_q=8, seqlen_k=8, softmax_scale=0.5, **D)), None, 8)
    (g,) = torch.autograd.grad(mod(s, 0, 0, 0, torch.tensor(0)).sum(), s)
    assert torch.equal(g, torch.full_like(s, 0.5))


@pytest.mark.parametrize("attr,name", [("FlexDynamicAdapter", "flex-dynamic"), ("gqa", "flex-dynamic-gqa")])
def test_resolves_with_flex_capability_and_its_own_key(attr, name):
    """Through its module:attr spec (the entry points pyproject.toml declares need a reinstall to
    show): flex's capability but the compile key, CUDA, a description."""
    k = registry.get(f"difftest.kernels.flex_dynamic:{attr}")
    flex = registry.get("flex-gqa" if "gqa" in name else "flex")
    assert k.name == name and k.description and k.capability.device == "cuda"
    assert k.capability.compile_key != flex.capability.compile_key
    for f in ("softmax_scale", "causal", "align", "window_left", "window_right", "softcap"):
        assert f in flex.capability.compile_key and f not in k.capability.compile_key
    assert "alibi_slopes" not in k.capability.compile_key  # slopes are a tensor: no recompile
    assert "rel_bias" not in k.capability.compile_key and k.capability.rel_bias  # a padded table: no recompile
    assert not flex.capability.rel_bias  # flex's own score_mod knows no table
    assert replace(k.capability, compile_key=flex.capability.compile_key, rel_bias=False) == flex.capability
    if not torch.cuda.is_available():
        assert "CUDA" in k.available()


@pytest.mark.parametrize("p", SPARSE_CASES, ids=lambda p: p.short())
def test_sparse_sibling_gives_flex_sparse_outputs(p):
    """flex-dynamic-sparse hands flex-sparse's BlockMask (kv_indices of the selected blocks, or
    the lookup) built over its own mask_mod: the same outputs."""
    k = registry.get("difftest.kernels.flex_dynamic:sparse")
    assert k.name == "flex-dynamic-sparse" and "sparsity" in k.capability.compile_key
    assert replace(k.capability, compile_key=FlexAdapter(sparse=True).capability.compile_key, rel_bias=False) == (
        FlexAdapter(sparse=True).capability
    )
    x = lay_out(make_inputs(p.validate()))
    want, _ = FlexAdapter(sparse=True).translate(x, grad=False)
    got, _ = k.translate(x, grad=False)
    assert max_err(got.o, want.o) < 1e-6 and max_err(got.lse, want.lse) < 1e-6


@pytest.mark.parametrize("lengths", [((0,), (0,)), ((2, 0), (0, 0))], ids=["no-token", "no-key"])
@pytest.mark.slow
def test_problems_without_tokens_on_a_side_fail_where_flex_fails(lengths):
    """No key at all: the block mask is built (over flex's mask_mod: vmap over an empty range
    fails on tensor constants), and the CPU's eager flex then fails as it does for flex (its
    kernel refuses empty reductions)."""
    sq, sk = lengths
    p = Problem(batch=len(sq), seqlen_q=sq, seqlen_k=sk, heads_q=1, heads_kv=1, **D).validate()
    errors = []
    for k in (FlexAdapter(), FlexDynamicAdapter()):
        with pytest.raises((IndexError, AttributeError)) as e:
            k.translate(lay_out(make_inputs(p)), grad=False)
        errors.append((e.type, "create_block_mask" in "".join(str(f) for f in e.traceback)))
    assert errors[0] == errors[1] and not errors[1][1]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.slow
def test_the_scale_is_not_rounded_to_the_input_dtype(dtype):
    """Flex traces score_mod with a score of the inputs' dtype (torch 2.13
    torch/_higher_order_ops/flex_attention.py:439-441): a score_mod that cast the float32 scale
    to ``score.dtype`` rounded 0.37 to bf16 (0.369) and moved O by a bf16 ulp against flex, whose
    scale is a Python float. Uncast, the forward is flex's exactly."""
    p = Problem(batch=2, seqlen_q=33, seqlen_k=47, heads_q=2, heads_kv=2, softmax_scale=0.37, dtype=dtype, **D)
    for q in (p, p.replace(causal=True, softcap=3.3)):
        x = lay_out(make_inputs(q.validate()))
        want, _ = FlexAdapter().translate(x, grad=False)
        got, _ = FlexDynamicAdapter().translate(x, grad=False)
        assert torch.equal(got.o, want.o) and torch.equal(got.lse, want.lse)


@pytest.mark.parametrize("make", [compiled_flex_dynamic, compiled_flex])
@pytest.mark.slow
def test_a_compiled_backward_runs_twice_per_forward(make):
    """The determinism reruns call the backward again on the same forward (retain_graph=True).
    AOTAutograd's donated buffers refuse a second call under ``dynamic=True`` (every
    flex-dynamic case on the H100 failed so before): making the adapter's compiled flex turns
    them off for the process, which a small compiled graph shows on the CPU."""
    with torch._functorch.config.patch(donated_buffer=True):  # torch's default, restored after
        make(backend="eager")
        torch._dynamo.reset()
        f = torch.compile(lambda x, y: (x.sin() @ y).exp(), dynamic=True)
        x, y = (torch.randn(6, 6, requires_grad=True) for _ in range(2))
        o = f(x, y)
        first = torch.autograd.grad(o, (x, y), torch.ones_like(o), retain_graph=True)
        again = torch.autograd.grad(o, (x, y), torch.ones_like(o), retain_graph=True)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_no_query_token_at_all_gives_empty_outputs_on_both():
    """Every query sequence empty: flex returns O and no LSE; both adapters answer an empty O and
    an all -inf LSE (the adapter once failed reading the missing LSE)."""
    p = Problem(batch=2, seqlen_q=(0, 0), seqlen_k=(3, 0), heads_q=1, heads_kv=1, **D).validate()
    for k in (FlexAdapter(), FlexDynamicAdapter()):
        out, _ = k.translate(lay_out(make_inputs(p)), grad=False)
        assert out.o.numel() == 0 and torch.isneginf(out.lse).all()
