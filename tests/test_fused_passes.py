"""The float64 truth's fused elementwise passes (oracles/fused_passes.py), run on the CPU
under Triton's interpreter: the truth with them equals the truth without them and the dense
float64 autograd reference, every problem class of tests/test_oracles.py, both softmax-shift
paths; the passes are really taken, and only where they are meant to be."""

import importlib
import os
import sys

import pytest
import torch

from difftest.inputs import make_inputs
from difftest.oracles import chunked_reference, reference
from difftest.outputs import Outputs
from difftest.problem import Problem
from tests.test_oracles import SKIP_CASES, max_err

pytest.importorskip("triton", reason="the fused passes are Triton kernels (the test extra installs Triton)")

CUDA_LIKE = ("SHIFT_IN_GEMM", "SPLIT_TERMS")  # chunked.py's per-device choices, CUDA's forced on the CPU


@pytest.fixture
def interpreted(monkeypatch):
    """chunked.py as on CUDA, its fused passes run by Triton's interpreter on CPU tensors;
    yields the fused_passes module with its two entry points counting calls. Afterwards the
    module is decorated again without the interpreter, so a GPU test later in the same
    process runs the compiled kernels."""
    import difftest.oracles.chunked as chunked

    fz = _interpret(monkeypatch)
    calls = {"exp_rowsum_": 0, "ds_and_terms_": 0}
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
    for flag in CUDA_LIKE:
        monkeypatch.setitem(getattr(chunked, flag), "cpu", True)
    yield fz
    _compiled(monkeypatch, fz)


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
# which runs one Python call per program) replaced by shorter ones of the same kind
CASES = {**{n: p for n, p in SKIP_CASES.items() if not n.startswith("long_")},
         "causal_gqa_fp16": Problem(seqlen_q=40, seqlen_k=40, heads_q=3, heads_kv=1, causal=True, head_dim_qk=16,
                                    head_dim_v=8, dtype="float16"),
         "window_varlen_sinks": Problem(batch=3, seqlen_q=(0, 30, 41), seqlen_k=(9, 0, 38), heads_q=2, heads_kv=2,
                                        window_left=9, window_right=4, sinks=True, head_dim_qk=8, head_dim_v=8,
                                        pad_tail=3),
         # logits in the thousands: the row maximum is taken, not the bound in the GEMM
         "huge_logits": Problem(seqlen_q=40, seqlen_k=50, heads_q=2, heads_kv=1, causal=True, values="scaled",
                                value_scale=40.0, sinks=True, head_dim_qk=16, head_dim_v=8)}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("chunk", [7, None])
def test_the_fused_truth_equals_the_eager_one_and_dense_float64(name, chunk, interpreted):
    x = make_inputs(CASES[name])
    eager = chunked_reference(x, "float64", chunk=chunk, magnitudes=True, fused_passes=False)
    assert interpreted.calls == {"exp_rowsum_": 0, "ds_and_terms_": 0}
    fused = chunked_reference(x, "float64", chunk=chunk, magnitudes=True)
    if any(a and b for a, b in zip(x.problem.seqlens_q, x.problem.seqlens_k)):
        assert interpreted.calls["exp_rowsum_"] > 0 and interpreted.calls["ds_and_terms_"] > 0
    assert eager.fused_chunks == 0 and (fused.fused_chunks > 0) == (interpreted.calls["ds_and_terms_"] > 0)
    # float32 sums of the same non-negative terms, formed unsplit (fused) or split (eager CUDA form)
    _assert_agree(x, eager, fused, dense_rel=1e-13, magnitude_rel=1e-5)


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


def test_the_fused_truth_without_magnitudes_equals_the_eager_one(interpreted):
    x = make_inputs(CASES["window_varlen_sinks"])
    eager = chunked_reference(x, "float64", chunk=16, fused_passes=False)
    fused = chunked_reference(x, "float64", chunk=16)
    assert interpreted.calls["ds_and_terms_"] > 0
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
    assert interpreted.calls["exp_rowsum_"] == 0
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 3 * 40 * 40)
    chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=10**9, skip_masked=False)
    assert interpreted.calls["exp_rowsum_"] == 1


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


def test_the_oracle_bench_times_the_fused_truth_next_to_the_eager_one(interpreted):
    from difftest.bench import oracle_markdown, run_oracle_bench

    rows = run_oracle_bench([(1, 2, 48, 8)], kernels=(), device="cpu", eager=True, log=lambda s: None)
    assert rows[0]["truth"]["passes"] == "fused" and rows[0]["truth_eager"]["passes"] == "eager"
    assert interpreted.calls["ds_and_terms_"] > 0
    assert "| fused | " in oracle_markdown(rows)


# ------------------------------------------------------------------ on a GPU: the compiled kernels
GPU_CASES = {
    "causal_2k_gqa": Problem(seqlen_q=2048, seqlen_k=2048, heads_q=8, heads_kv=2, causal=True, head_dim_qk=128,
                             head_dim_v=128, dtype="bfloat16"),
    "bottom_right_window_sinks": Problem(batch=2, seqlen_q=(700, 1500), seqlen_k=(1900, 1200), heads_q=4, heads_kv=4,
                                         causal=True, window_left=300, sinks=True, head_dim_qk=64, head_dim_v=96,
                                         dtype="float16", pad_tail=5),
    "huge_logits": Problem(seqlen_q=600, seqlen_k=1100, heads_q=2, heads_kv=1, values="scaled", value_scale=40.0,
                           head_dim_qk=32, head_dim_v=32, dtype="float16"),
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

    assert not isinstance(fused_passes._exp_rowsum_kernel, InterpretedFunction)  # compiled, not interpreted
    monkeypatch.setattr(chunked, "FUSED_MIN_SCORES", 0)
    x = make_inputs(GPU_CASES[name], "cuda")
    eager = chunked_reference(x, "float64", magnitudes=True, fused_passes=False)
    fused = chunked_reference(x, "float64", magnitudes=True, fused_passes=True)
    assert fused.fused_chunks > 0
    # dense: 1e-12, float64 rounding grows with the logits (R14: 3.5e-13 of dQ's size at logits ~1e3);
    # magnitudes: the same non-negative sums formed unsplit (fused) or split (eager) in TF32 GEMMs,
    # operands rounded to 10 bits differ, R15 measured 1.7e-4 (chunked.MAGNITUDE_TF32)
    _assert_agree(x, eager, fused, dense_rel=1e-12, magnitude_rel=2e-3)


def test_a_fused_pass_that_cannot_run_falls_back_to_eager_once(interpreted, monkeypatch):
    """A Triton that cannot build the kernels on some GPU must not take the truth down: the
    chunk falls back to the eager passes (same values), the fused passes stay off for the
    process with one warning; asked for explicitly (fused_passes=True), the error is raised."""
    import difftest.oracles.chunked as chunked

    class Unbuildable:
        def __getitem__(self, grid):
            def launch(*a, **k):
                raise RuntimeError("no float64 on this GPU")
            return launch

    x = make_inputs(CASES["causal_gqa_fp16"])
    eager = chunked_reference(x, "float64", chunk=16, magnitudes=True, fused_passes=False)
    for kernel in ("_exp_rowsum_kernel", "_ds_terms_kernel"):  # the first or the second pass fails
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
    assert not isinstance(fz._exp_rowsum_kernel, InterpretedFunction)
    assert not isinstance(fz._ds_terms_kernel, InterpretedFunction)
