"""The float64 truth's fused elementwise passes (oracles/fused_passes.py), run on the CPU
under Triton's interpreter: the truth with them equals the truth without them and the dense
float64 autograd reference, every problem class of tests/test_oracles.py, both softmax-shift
paths; the passes are really taken, and only where they are meant to be."""

import importlib
import os
import sys
import time

import pytest
import torch

from difftest.model.inputs import make_inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem
from difftest.oracles import chunked_reference, reference
from tests.test_oracles import MAGNITUDE_CASES, SKIP_CASES, assert_bound_from_above, max_err

pytest.importorskip("triton", reason="the fused passes are Triton kernels (the test extra installs Triton)")

CUDA_LIKE = ("SHIFT_IN_GEMM", "SPLIT_TERMS")  # chunked.py's per-device choices, CUDA's forced on the CPU
# the first pass (E and the row sums), the second (dS and the terms): S and dP from torch or inside
ENTRY_POINTS = ("exp_rowsum_", "ds_and_terms_", "scores_exp", "dp_ds_and_terms_")
FIRST, SECOND = ("exp_rowsum_", "scores_exp"), ("ds_and_terms_", "dp_ds_and_terms_")
# problems some of whose chunks take the bound as the softmax shift at both chunk sizes, so the
# GEMMs are fused there when asked (the others: no key every row of a chunk sees, or huge logits)
GEMM_CASES = (
    "no_mask",
    "causal_top_left",
    "causal_top_left_sq_gt_sk",
    "causal_bottom_right_sq_lt_sk",
    "window_left",
    "window_right",
    "gqa",
    "mqa",
    "varlen_empty_q_and_k",
    "sinks",
    "sinks_varlen_empty_k",
    "pad_tail",
    "custom_scale_large_logits",
    "causal_gqa_fp16",
)


@pytest.fixture
def interpreted(monkeypatch):
    """chunked.py as on CUDA, its fused passes run by Triton's interpreter on CPU tensors;
    yields the fused_passes module with its two entry points counting calls. Afterwards the
    module is decorated again without the interpreter, so a GPU test later in the same
    process runs the compiled kernels."""
    import difftest.oracles.chunked as chunked

    fz = _interpret(monkeypatch)
    calls = dict.fromkeys(ENTRY_POINTS, 0)
    for name in calls:
        real = getattr(fz, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(fz, name, counted)
    fz.calls = calls
    monkeypatch.setitem(chunked._FUSED, "module", fz)
    monkeypatch.setitem(chunked.FUSED_PASSES, "cpu", True)
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 0)
    monkeypatch.setattr(chunked, "FUSED_GEMM_MIN_SCORES", 0)
    for flag in CUDA_LIKE:
        monkeypatch.setitem(getattr(chunked, flag), "cpu", True)
    yield fz
    _compiled(monkeypatch, fz)


@pytest.fixture
def short_blocks(interpreted, monkeypatch):
    """``interpreted`` with 32 columns per program in the row passes instead of 1024. The
    problems here have rows of at most 90 keys, so a row then spans one to three blocks (the
    per-block partial sums are taken, as for a production row wider than 1024 keys), and
    Triton's interpreter, which runs a reduction one element at a time in Python, no longer
    walks 1024 mostly masked columns per row (a tenth of the time). The kernels' own tests
    below keep the real width, on rows wider than one block."""
    monkeypatch.setattr(interpreted, "BLOCK", 32)
    return interpreted


def _interpret(monkeypatch):
    """oracles/fused_passes.py re-decorated with TRITON_INTERPRET set: interpreted kernels."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from difftest.oracles import fused_passes

    return importlib.reload(fused_passes)


def _compiled(monkeypatch, fz) -> None:
    """The module re-decorated without the interpreter (its entry points the real ones again)."""
    monkeypatch.delenv("TRITON_INTERPRET")
    importlib.reload(fz)


def _scale(t: torch.Tensor) -> float:
    t = t.double()
    t = t[torch.isfinite(t)]
    return max(1.0, t.abs().max().item()) if t.numel() else 1.0


# tests/test_oracles.py's problem classes; its two long ones (minutes under the interpreter,
# which runs one Python call per program) replaced by shorter ones of the same kind; the capped
# ones run eagerly by design (the fused passes know no tanh): test_a_capped_problem_never_fuses
# capped or biased (ALiBi, a relative-position table): the fused passes and the shift bound know
# neither (chunked runs them eagerly)
CAPPED = {n: p for n, p in SKIP_CASES.items() if p.softcap is not None or p.biased}
CASES = {
    **{n: p for n, p in SKIP_CASES.items() if not n.startswith("long_") and n not in CAPPED},
    "causal_gqa_fp16": Problem(
        seqlen_q=40, seqlen_k=40, heads_q=3, heads_kv=1, causal=True, head_dim_qk=16, head_dim_v=8, dtype="float16"
    ),
    "window_varlen_sinks": Problem(
        batch=3,
        seqlen_q=(0, 30, 41),
        seqlen_k=(9, 0, 38),
        heads_q=2,
        heads_kv=2,
        window_left=9,
        window_right=4,
        sinks=True,
        head_dim_qk=8,
        head_dim_v=8,
        pad_tail=3,
    ),
    # logits in the thousands: the row maximum is taken, not the bound in the GEMM
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


def _count(calls, names) -> int:
    return sum(calls[n] for n in names)


@pytest.mark.parametrize("name", list(CASES))
# unchunked rows (None) are every campaign's truth in the default run too: the tier of 4.5 s tests
# and families (tests/README.md) keeps the chunked passes here and runs both with -m slow
@pytest.mark.parametrize("chunk", [7, pytest.param(None, marks=pytest.mark.slow)])
@pytest.mark.parametrize("gemms", [True, False])
@pytest.mark.usefixtures("short_blocks")
def test_the_fused_truth_equals_the_eager_one_and_dense_float64(name, chunk, gemms, interpreted):
    """Both fused forms: the passes alone, and the passes with the Q K^T and dO V^T GEMMs
    inside them (where the chunk's softmax shift is the bound)."""
    x = make_inputs(CASES[name])
    eager = chunked_reference(x, "float64", chunk=chunk, magnitudes=True, fused_passes=False)
    assert interpreted.calls == dict.fromkeys(ENTRY_POINTS, 0)
    fused = chunked_reference(x, "float64", chunk=chunk, magnitudes=True, fused_gemms=gemms)
    if any(a and b for a, b in zip(x.problem.seqlens_q, x.problem.seqlens_k)):
        assert _count(interpreted.calls, FIRST) > 0 and _count(interpreted.calls, SECOND) > 0
    assert eager.fused_chunks == 0 and (fused.fused_chunks > 0) == (_count(interpreted.calls, SECOND) > 0)
    assert fused.fused_gemm_chunks == interpreted.calls["scores_exp"] == interpreted.calls["dp_ds_and_terms_"]
    if not gemms:
        assert fused.fused_gemm_chunks == 0
    elif name in GEMM_CASES:
        assert fused.fused_gemm_chunks > 0
    # float32 sums of the same non-negative terms, formed unsplit (fused) or split (eager CUDA form)
    _assert_agree(x, eager, fused, dense_rel=1e-13, magnitude_rel=1e-5)


@pytest.mark.parametrize("name", sorted(CAPPED))
def test_a_capped_problem_never_fuses(name, interpreted):
    """The fused passes and the shift bound assume uncapped logits: a softcap runs every chunk
    eagerly (an ALiBi bias too), however the fused passes are asked for."""
    x = make_inputs(CAPPED[name])
    out = chunked_reference(x, "float64", magnitudes=True, fused_passes=True, fused_gemms=True)
    assert interpreted.calls == dict.fromkeys(ENTRY_POINTS, 0) and out.fused_chunks == 0
    errs = max_err(reference(x, "float64"), out)
    assert errs.pop("lse") < 1e-6 and max(errs.values(), default=0.0) < 1e-13 * _scale(out.dq), errs


def _assert_agree(x, eager, fused, dense_rel: float, magnitude_rel: float) -> None:
    """The fused truth equals the eager one within 1e-14 of each output's size, dense float64
    autograd within ``dense_rel`` (LSE and dSink within 1e-6), and the eager magnitudes within
    ``magnitude_rel``."""
    for n, t in eager.items():
        assert max_err(Outputs(**{n: t}), Outputs(**{n: fused.get(n)}))[n] <= 1e-14 * _scale(t), n
    errs = max_err(reference(x, "float64"), fused)
    assert errs.pop("lse") < 1e-6, errs
    if "dsink" in errs:
        assert errs.pop("dsink") < 1e-6 * _scale(fused.dsink), errs
    assert max(errs.values(), default=0.0) < dense_rel * _scale(fused.dq), errs
    assert fused.magnitude == pytest.approx(eager.magnitude, rel=magnitude_rel, abs=1e-300)


# test_oracles' cancelling case with one sequence and one GQA group of 2 (it had 2 and 2): every
# row is as before (70 causal rows of 90 keys, mixed dO, logits x1.5, a sink), a quarter of the
# rows for Triton's interpreter to walk (10.8 s and 6.6 s per call before)
FUSED_MAGNITUDE_CASES = {
    "mixed_do_large_logits": MAGNITUDE_CASES["mixed_do_large_logits"].replace(batch=1, heads_q=2, heads_kv=1)
}


@pytest.mark.parametrize("name", ["causal_gqa_fp16", "window_varlen_sinks", "mixed_do_large_logits"])
@pytest.mark.parametrize("gemms", [True, False])
@pytest.mark.usefixtures("short_blocks")
@pytest.mark.slow
def test_fused_bfloat16_magnitudes_bound_the_float64_ones_from_above(name, gemms, interpreted):
    """CUDA's bfloat16 magnitudes with the terms from the fused kernels: at or above the float64
    sums, within 2^-5 (as tests/test_oracles.py checks them for the eager forms)."""
    x = make_inputs({**CASES, **MAGNITUDE_CASES, **FUSED_MAGNITUDE_CASES}[name])
    m64 = chunked_reference(x, "float64", chunk=9, magnitudes=True, magnitudes_dtype="float64", fused_passes=False)
    mb = chunked_reference(x, "float64", chunk=9, magnitudes=True, magnitudes_dtype="bfloat16", fused_gemms=gemms)
    assert mb.fused_chunks > 0 and (mb.fused_gemm_chunks > 0) == gemms
    assert_bound_from_above(mb.magnitude, m64.magnitude)


@pytest.mark.usefixtures("short_blocks")
def test_the_fused_truth_without_magnitudes_equals_the_eager_one(interpreted):
    x = make_inputs(CASES["window_varlen_sinks"])
    eager = chunked_reference(x, "float64", chunk=16, fused_passes=False)
    fused = chunked_reference(x, "float64", chunk=16)
    assert _count(interpreted.calls, SECOND) > 0
    for n, t in eager.items():
        assert max_err(Outputs(**{n: t}), Outputs(**{n: fused.get(n)}))[n] <= 1e-14 * _scale(t), n


def test_ds_and_the_terms_are_the_eager_expressions_bit_for_bit(interpreted):
    g = torch.Generator().manual_seed(3)
    e = torch.rand(3, 37, 1500, dtype=torch.float64, generator=g)  # w > one block
    e[0, 2, 5:900] = 0.0  # masked scores
    dp = torch.randn(3, 37, 1500, dtype=torch.float64, generator=g) * 50
    delta = torch.randn(3, 37, dtype=torch.float64, generator=g)
    inv = 1.0 / e.sum(-1, keepdim=True).clamp_min(1e-3)
    pm_eager = torch.mul(e, inv, out=torch.empty(e.shape, dtype=torch.float32))
    dabs = delta.abs().to(torch.float32).unsqueeze(-1)
    terms_eager = dp.to(torch.float32, copy=True).abs_().add_(dabs).mul_(pm_eager)  # chunked.py's CPU form
    ds_eager = (dp - delta.unsqueeze(-1)) * e
    pm, terms = interpreted.ds_and_terms_(dp, e, delta, inv, torch.float32)
    assert torch.equal(pm, pm_eager) and torch.equal(terms, terms_eager) and torch.equal(dp, ds_eager)


def _masked_scores(q, k, mask):
    """q k^T with every score the mask spec of scores_exp hides set to -inf (torch)."""
    s = q @ k.transpose(1, 2)
    if mask is not None:
        base, group, left, right = mask
        rel = torch.arange(k.shape[1]).view(1, -1) - (base + torch.arange(q.shape[1]) // group).view(-1, 1)
        seen = torch.ones_like(rel, dtype=torch.bool)
        if right is not None:
            seen &= rel < right
        if left is not None:
            seen &= rel >= -left
        s = s.masked_fill(~seen, float("-inf"))
    return s


@pytest.mark.parametrize(
    "mask", [None, (0, 1, None, 1), (5, 3, None, 1), (-4, 2, 6, 3), (20, 1, 0, None), (-70, 1, None, 1)]
)
@pytest.mark.parametrize("dim", [16, 24, 40])
@pytest.mark.slow
def test_scores_exp_is_exp_of_the_masked_scores(mask, dim, interpreted):
    """E = exp(q k^T - shift), masked scores 0, and the row sums, against torch: causal rows
    (with a GQA group and a bottom-right offset), both window sides, rows that see nothing;
    a head dim that is not a multiple of the K step, tiles past the rows and keys."""
    g = torch.Generator().manual_seed(dim)
    q = torch.randn(3, 40, dim, dtype=torch.float64, generator=g)  # a full tile of 32 rows and a partial one
    kk = torch.randn(3, 90, dim, dtype=torch.float64, generator=g)
    k = kk[:, 5:85]  # a band of keys: a head stride longer than its rows
    s = _masked_scores(q, k, mask)
    shift = q.norm(dim=-1) * k.norm(dim=-1).amax(-1, keepdim=True)  # >= every score, as chunked's bound
    want = (s - shift.unsqueeze(-1)).exp()
    e, total = interpreted.scores_exp(q, k, shift, mask)
    rtol = 4e-16 * shift.max().item()  # a score's rounding (its summation order) moves exp by that much
    assert torch.allclose(e, want, rtol=rtol, atol=0) and torch.equal(e == 0, want == 0)
    assert torch.allclose(total, want.sum(-1), rtol=rtol, atol=0)


def test_dp_ds_and_terms_are_the_eager_expressions(interpreted):
    """dS = (dO V^T - Delta) E in place of E, P and the terms, against the eager expressions
    with dP from torch (the product's summation order differs: within 1e-15 of its size)."""
    g = torch.Generator().manual_seed(5)
    do = torch.randn(2, 37, 24, dtype=torch.float64, generator=g)
    v = torch.randn(2, 100, 24, dtype=torch.float64, generator=g)[:, 10:90]
    e = torch.rand(2, 37, 80, dtype=torch.float64, generator=g)
    e[0, 2, 5:60] = 0.0  # masked scores
    delta = torch.randn(2, 37, dtype=torch.float64, generator=g)
    inv = 1.0 / e.sum(-1, keepdim=True)
    dp = do @ v.transpose(1, 2)
    ds_eager = (dp - delta.unsqueeze(-1)) * e
    pm_eager = torch.mul(e, inv, out=torch.empty(e.shape, dtype=torch.float32))
    terms_eager = dp.to(torch.float32).abs_().add_(delta.abs().to(torch.float32).unsqueeze(-1)).mul_(pm_eager)
    ds = e.clone()
    pm, terms = interpreted.dp_ds_and_terms_(do, v, ds, delta, inv, torch.float32)
    assert torch.allclose(ds, ds_eager, rtol=0, atol=1e-15 * dp.abs().max().item()) and ds[0, 2, 5:60].eq(0).all()
    assert torch.equal(pm, pm_eager) and torch.allclose(terms, terms_eager, rtol=2e-7, atol=0)
    p64, g64 = e * inv, (dp.abs() + delta.abs().unsqueeze(-1)) * e * inv
    for fn, args in ((interpreted.dp_ds_and_terms_, (do, v, e.clone())), (interpreted.ds_and_terms_, (dp.clone(), e))):
        pb, gb = fn(*args, delta, inv, torch.bfloat16)  # bfloat16 terms: rounded once, to nearest
        assert pb.dtype == gb.dtype == torch.bfloat16
        assert torch.allclose(pb.double(), p64, rtol=2**-8, atol=0)
        assert torch.allclose(gb.double(), g64, rtol=2**-8, atol=0)
        assert pb.eq(0).sum() == p64.eq(0).sum() > 0
    e2 = e.clone()
    assert interpreted.dp_ds_and_terms_(do, v, e2, delta) is None and torch.equal(e2, ds)
    with pytest.raises(ValueError, match="disagree"):
        interpreted.dp_ds_and_terms_(do, v[:, :5], e.clone(), delta)


@pytest.mark.slow
def test_exp_rowsum_matches_torch_on_masked_and_shifted_rows(interpreted):
    g = torch.Generator().manual_seed(4)
    s = torch.randn(2, 9, 2100, dtype=torch.float64, generator=g) * 20
    s[1, 3] = float("-inf")  # a row that sees nothing
    s[0, 1, 7:] = float("-inf")
    m = s.amax(-1)
    shift = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    want = (s - shift.unsqueeze(-1)).exp()
    total = interpreted.exp_rowsum_(s, shift)
    assert torch.allclose(s, want, rtol=4e-16, atol=0) and s[1, 3].eq(0).all()
    assert torch.allclose(total, want.sum(-1), rtol=1e-15, atol=0)


def test_small_chunks_stay_eager(interpreted, monkeypatch):
    """Below FUSED_MIN_SCORES scores a chunk takes the eager passes (a short campaign never
    JIT-compiles the kernels); at or above it, the fused ones."""
    import difftest.oracles.chunked as chunked

    x = make_inputs(CASES["causal_gqa_fp16"])  # 3 heads, 40 x 40
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 3 * 40 * 40 + 1)
    chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert _count(interpreted.calls, FIRST) == 0
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 3 * 40 * 40)
    chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert _count(interpreted.calls, FIRST) == 1


@pytest.mark.slow
def test_only_large_chunks_take_the_fused_gemms(interpreted, monkeypatch):
    """Below FUSED_GEMM_MIN_SCORES scores a fused chunk takes its products from torch and the
    passes alone (one compiled kernel for every chunk shape); at or above it, the kernels
    with the products inside (compiled per size pattern: worth it only where the work is)."""
    import difftest.oracles.chunked as chunked

    x = make_inputs(CASES["causal_gqa_fp16"])  # 3 heads, 40 x 40, one chunk with the bound as its shift
    monkeypatch.setattr(chunked, "FUSED_GEMM_MIN_SCORES", 3 * 40 * 40 + 1)
    out = chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert out.fused_chunks == 1 and out.fused_gemm_chunks == 0
    assert interpreted.calls["exp_rowsum_"] == 1 and interpreted.calls["scores_exp"] == 0
    monkeypatch.setattr(chunked, "FUSED_GEMM_MIN_SCORES", 3 * 40 * 40)
    out = chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert out.fused_chunks == 1 and out.fused_gemm_chunks == 1
    assert interpreted.calls["scores_exp"] == 1 and interpreted.calls["dp_ds_and_terms_"] == 1


def test_the_cpu_keeps_eager_passes_and_a_missing_triton_falls_back(monkeypatch):
    import difftest.oracles.chunked as chunked

    assert chunked.FUSED_PASSES == {"cuda": True, "cpu": False}
    assert chunked._fused_module("cpu", None) is None
    monkeypatch.setitem(chunked.FUSED_PASSES, "cpu", True)
    monkeypatch.setattr(chunked, "_FUSED", {})
    monkeypatch.setitem(sys.modules, "difftest.oracles.fused_passes", None)  # the import fails
    monkeypatch.delattr(sys.modules["difftest.oracles"], "fused_passes", raising=False)
    assert chunked._fused_module("cpu", None) is None  # quietly eager
    with pytest.raises(RuntimeError, match="Triton does not import"):
        chunked._fused_module("cpu", True)
    assert chunked._fused_module("cpu", False) is None


@pytest.mark.slow
def test_the_oracle_bench_times_the_fused_truth_next_to_the_eager_one(interpreted):
    from difftest.measure.bench import oracle_markdown, run_oracle_bench

    rows = run_oracle_bench([(1, 2, 48, 8)], kernels=(), device="cpu", eager=True, passes_only=True, log=lambda s: None)
    assert rows[0]["truth"]["passes"] == "fused+gemms" and rows[0]["truth_eager"]["passes"] == "eager"
    assert rows[0]["truth_passes_only"]["passes"] == "fused" and rows[0]["truth"]["fused_gemm_chunks"] > 0
    assert rows[0]["truth"]["magnitudes_dtype"] == "float32"  # the runner's on the CPU, named rather than None
    assert _count(interpreted.calls, SECOND) > 0
    assert "| fused+gemms | " in oracle_markdown(rows)


def test_the_truths_kernel_builds_are_their_own_phase(interpreted, monkeypatch):
    """A campaign's time split charges the truth's Triton builds (each kernel's warm-up, where a
    new specialisation compiles) to "truth_compile", not to "truth": a build stands in here as
    a warm-up that takes 0.1 s the first time each kernel meets it."""
    from difftest.execute import timing
    from difftest.oracles import fused_passes

    built = set()

    def slow_first_build(kernel):
        def warmup(*a, **k):
            if kernel not in built:
                built.add(kernel)
                time.sleep(0.1)

        return warmup

    for kernel in KERNELS:
        monkeypatch.setattr(getattr(fused_passes, kernel), "warmup", slow_first_build(kernel))
    x = make_inputs(CASES["causal_gqa_fp16"])
    with timing.collect() as t, timing.phase("truth"):
        out = chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert out.fused_gemm_chunks == 1 and built == {"_scores_exp_kernel", "_dp_ds_terms_kernel"}
    assert t.seconds.get("truth_compile", 0.0) >= 0.2


# ------------------------------------------------------------------ on a GPU: the compiled kernels
KERNELS = ("_exp_rowsum_kernel", "_ds_terms_kernel", "_scores_exp_kernel", "_dp_ds_terms_kernel")
GPU_CASES = {
    "causal_2k_gqa": Problem(
        seqlen_q=2048,
        seqlen_k=2048,
        heads_q=8,
        heads_kv=2,
        causal=True,
        head_dim_qk=128,
        head_dim_v=128,
        dtype="bfloat16",
    ),
    "bottom_right_window_sinks": Problem(
        batch=2,
        seqlen_q=(700, 1500),
        seqlen_k=(1900, 1200),
        heads_q=4,
        heads_kv=4,
        causal=True,
        window_left=300,
        sinks=True,
        head_dim_qk=64,
        head_dim_v=96,
        dtype="float16",
        pad_tail=5,
    ),
    "huge_logits": Problem(
        seqlen_q=600,
        seqlen_k=1100,
        heads_q=2,
        heads_kv=1,
        values="scaled",
        value_scale=40.0,
        head_dim_qk=32,
        head_dim_v=32,
        dtype="float16",
    ),
}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_on_cuda_the_fused_truth_equals_the_eager_one_and_dense_float64(name, monkeypatch):
    """The compiled kernels (not the interpreter) in the truth as the runner calls it on CUDA,
    every chunk fused: equal to the eager truth and to the dense float64 autograd reference."""
    from triton.runtime.interpreter import InterpretedFunction

    import difftest.oracles.chunked as chunked
    from difftest.oracles import fused_passes

    for kernel in KERNELS:  # compiled, not interpreted
        assert not isinstance(getattr(fused_passes, kernel), InterpretedFunction), kernel
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 0)
    monkeypatch.setattr(chunked, "FUSED_GEMM_MIN_SCORES", 0)
    x = make_inputs(GPU_CASES[name], "cuda")
    eager = chunked_reference(x, "float64", magnitudes=True, fused_passes=False)
    passes = chunked_reference(x, "float64", magnitudes=True, fused_passes=True, fused_gemms=False)
    fused = chunked_reference(x, "float64", magnitudes=True, fused_passes=True)
    assert passes.fused_chunks > 0 and passes.fused_gemm_chunks == 0
    assert fused.fused_chunks > 0 and (fused.fused_gemm_chunks > 0) == (name != "huge_logits")
    # dense: 1e-12, float64 rounding grows with the logits (3.5e-13 of dQ's size at logits ~1e3 on the H200);
    # magnitudes: the same non-negative sums formed unsplit (fused) or split (eager) in bfloat16 GEMMs
    # (chunked.MAGNITUDES_DTYPE), each within [1, 1 + 2^-5] of the float64 sums (tests/test_oracles.py)
    for out in (passes, fused):
        _assert_agree(x, eager, out, dense_rel=1e-12, magnitude_rel=2**-5)


@pytest.mark.slow
def test_a_fused_pass_that_cannot_run_falls_back_to_eager_once(interpreted, monkeypatch):
    """A Triton that cannot build the kernels on some GPU must not take the truth down: the
    chunk falls back to the eager passes (same values), the fused passes stay off for the
    process with one warning; asked for explicitly (fused_passes=True), the error is raised."""
    import difftest.oracles.chunked as chunked

    class Unbuildable:  # Triton builds in the warm-up (fused_passes._start); the launch would too
        def warmup(self, *a, **k):
            raise RuntimeError("no float64 on this GPU")

        def __getitem__(self, grid):
            return self.warmup

    x = make_inputs(CASES["causal_gqa_fp16"])
    eager = chunked_reference(x, "float64", chunk=16, magnitudes=True, fused_passes=False)
    # the first or the second pass fails, with the GEMMs inside them or not
    for kernel, gemms in (
        ("_exp_rowsum_kernel", False),
        ("_ds_terms_kernel", False),
        ("_scores_exp_kernel", True),
        ("_dp_ds_terms_kernel", True),
    ):
        monkeypatch.setattr(chunked, "FUSED_GEMMS", gemms)
        monkeypatch.setattr(chunked, "_FUSED", {"module": interpreted})
        with monkeypatch.context() as m:
            m.setattr(interpreted, kernel, Unbuildable())
            with pytest.warns(RuntimeWarning, match="fused passes are off.*no float64") as caught:
                out = chunked_reference(x, "float64", chunk=16, magnitudes=True)
            assert len(caught) == 1 and chunked._FUSED["failed"] and out.fused_chunks == 0
            for n, t in eager.items():
                assert max_err(Outputs(**{n: t}), Outputs(**{n: out.get(n)}))[n] <= 1e-14 * _scale(t), n
            assert out.magnitude == pytest.approx(eager.magnitude, rel=1e-5, abs=1e-300)
            with pytest.raises(RuntimeError, match="no float64"):  # insisted on: even after the fallback
                chunked_reference(x, "float64", chunk=16, magnitudes=True, fused_passes=True)


def test_the_fixture_leaves_compiled_kernels_behind(monkeypatch):
    """The interpreter's kernels do not outlive the tests that use them: a GPU test later in
    the same process would otherwise run the interpreter on CUDA tensors, silently."""
    from triton.runtime.interpreter import InterpretedFunction

    if os.environ.get("TRITON_INTERPRET"):
        pytest.skip("the whole run is interpreted")
    fz = _interpret(monkeypatch)
    assert isinstance(fz._exp_rowsum_kernel, InterpretedFunction)
    _compiled(monkeypatch, fz)
    for kernel in KERNELS:
        assert not isinstance(getattr(fz, kernel), InterpretedFunction), kernel


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_warm_up_builds_every_kernel_before_its_launch(monkeypatch):
    """Every build of the truth's kernels happens in the warm-up (the "truth_compile" phase),
    none in the launch that follows it: the warm-up's arguments give the launch's key. The
    kernels' in-memory caches are emptied first, so each is built (or loaded from disk) again."""
    import triton

    import difftest.oracles.chunked as chunked
    from difftest.oracles import fused_passes

    builds = []

    def record(*, fn, is_manual_warmup, **_):
        builds.append((fn.name, is_manual_warmup))

    for kernel in KERNELS:
        getattr(fused_passes, kernel).device_caches.clear()
    monkeypatch.setattr(triton.knobs.runtime, "jit_post_compile_hook", record)
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 0)
    monkeypatch.setattr(chunked, "FUSED_GEMM_MIN_SCORES", 0)
    x = make_inputs(GPU_CASES["bottom_right_window_sinks"], "cuda")
    chunked_reference(x, "float64", magnitudes=True, fused_passes=True, fused_gemms=False)
    chunked_reference(x, "float64", magnitudes=True, fused_passes=True)
    assert {name for name, _ in builds} == set(KERNELS)
    assert all(warm for _, warm in builds), builds
