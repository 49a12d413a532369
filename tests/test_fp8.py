"""FP8 problems end to end on the CPU: the model (dtype, scaling, inputs), the strategies
(FP8 only for a capability that lists it), the FP8 yardstick and budget, the correct CPU
emulation ``fp8-current-scaling`` passing, and each FP8 mutant failing on its example."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from difftest.judge.gates import EPS, budget_limit
from difftest.judge.runner import RunConfig, run_case
from difftest.kernels import mutants as catalogue
from difftest.kernels.blockwise import CAPABILITY as BLOCKWISE
from difftest.kernels.variants import VARIANTS, Fp8CurrentScaling
from difftest.model import fp8
from difftest.model.inputs import make_inputs
from difftest.model.problem import FP8_DTYPES, Problem, ProblemError
from difftest.oracles import fp8_reference, references
from difftest.strategies.problems import problems
from difftest.vocab import Status

E4 = "float8_e4m3fn"
FP8_MUTANTS = sorted(n for n, m in catalogue.MUTANTS.items() if m.bug_class == "fp8-scaling")


def small(**kw) -> Problem:
    base = dict(seqlen_q=9, seqlen_k=13, heads_q=2, heads_kv=1, head_dim_qk=16, head_dim_v=16, dtype=E4)
    return Problem(**{**base, **kw})


# ------------------------------------------------------------------ model
def test_fp8_problem_round_trips_and_needs_input_version_2():
    p = small(dtype="float8_e5m2").validate()
    assert Problem.from_json(p.to_json()) == p
    with pytest.raises(ProblemError, match="FP8 needs input_version 2"):
        small(input_version=1).validate()
    with pytest.raises(ProblemError, match="float8_e4m3fn"):
        small(dtype="float8").validate()


@pytest.mark.parametrize("amax", [1e-30, 0.37, 1.0, 223.9, 224.0, 448.0, 449.0, 3e9])
@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_pow2_scale_puts_amax_in_the_top_binade(amax, dtype):
    s = fp8.pow2_scale(amax, dtype)
    top = fp8.fmt(dtype).fmax
    assert math.frexp(s)[0] == 0.5  # a power of two
    assert top / 2 < amax * s <= top or s in (2.0**-126, 2.0**126)


def test_pow2_scale_of_nothing_is_one():
    assert fp8.pow2_scale(0.0, E4) == fp8.pow2_scale(float("nan"), E4) == fp8.pow2_scale(float("inf"), E4) == 1.0


@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_inputs_hold_exactly_the_dequantised_fp8_bytes(dtype):
    p = small(dtype=dtype, values="mixed_do", value_scale=3.0, seed=4)
    x = make_inputs(p)
    for n in ("q", "k", "v", "do"):
        t = x.fp8[n]
        assert t.data.dtype == fp8.fmt(dtype).torch_dtype
        assert torch.equal(t.data.to(torch.float64) * t.descale, getattr(x, n).to(torch.float64))
        assert fp8.fmt(dtype).fmax / 2 < t.amax / t.descale <= fp8.fmt(dtype).fmax
    again = make_inputs(p)
    assert again.digest() == x.digest() and torch.equal(
        again.fp8["q"].data.view(torch.uint8), x.fp8["q"].data.view(torch.uint8)
    )


def test_a_16_bit_problem_has_no_fp8_tensors_and_its_own_dtype():
    x = make_inputs(small(dtype="float16"))
    assert x.fp8 is None and x.q.dtype == torch.float16


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_strategies_draw_fp8_only_where_the_capability_lists_it(data):
    plain = data.draw(problems(BLOCKWISE))
    assert plain.dtype not in FP8_DTYPES
    drawn = data.draw(problems(Fp8CurrentScaling.capability))
    assert drawn.dtype in FP8_DTYPES


# ------------------------------------------------------------------ yardstick and budget
def test_the_yardstick_stores_its_outputs_in_the_format():
    x = make_inputs(small(causal=True, seed=3))
    y = fp8_reference(x)
    for n in ("o", "dq", "dk", "dv"):
        s = y.scales[n]
        stored = y.get(n) * s
        assert torch.equal(stored.to(torch.float8_e4m3fn).to(torch.float32), stored), n
        assert y.amax[n] > 0
    assert y.scales["ds"] == fp8.pow2_scale(y.amax["ds"], E4)


def test_an_fp8_problem_is_judged_by_the_fp8_yardstick_alone():
    refs = references(make_inputs(small()))
    assert len(refs.yardsticks) == 1 and refs.flash is refs.yardsticks[0] and hasattr(refs.flash, "scales")


def test_the_fp8_floor_is_one_ulp_at_the_tensors_magnitude():
    p = small()
    truth = torch.full((4,), 1e-3, dtype=torch.float64)
    b = budget_limit(p, truth, truth, 2.0, 2.0, name="dq")
    # one e4m3 ulp at |truth| = 1e-3 (no floor_magnitude), float32's 2 ulps at magnitude 1, P's
    # float32 rounding and the accumulator over 13 keys (the terms every dtype's floor has)
    want = (
        EPS[E4] * 1e-3
        + 2 * EPS["float32"] * 1.0
        + math.expm1(2 * EPS["float32"]) * 1e-3
        + math.sqrt(13) * EPS["float32"] / 2 * 1e-3
    )
    assert b["floor"] == pytest.approx(want, rel=1e-9)
    zero = budget_limit(p, torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 2.0, 2.0, name="o")
    assert zero["limit"] > 0


# ------------------------------------------------------------------ the emulation and the mutants
def test_the_emulation_is_in_the_variant_catalogue():
    v = VARIANTS["fp8-current-scaling"]
    assert v.deterministic and set(v.factory().capability.dtypes) == set(FP8_DTYPES)


@pytest.mark.parametrize(
    "p",
    [
        small(causal=True, seqlen_q=40, seqlen_k=70, heads_q=4, heads_kv=2),
        small(dtype="float8_e5m2", batch=2, seqlen_q=(9, 30), seqlen_k=(17, 0), sinks=True, pad_tail=3),
        small(values="scaled", value_scale=8.0, seqlen_q=33, seqlen_k=64),
        small(values="heavy_tailed", value_scale=4.0, window_left=5, window_right=2),
        small(batch=2, seqlen_q=(0, 0), seqlen_k=(0, 0)),  # nothing to attend: every tensor empty
    ],
    ids=["causal-gqa", "e5m2-varlen-sinks", "scaled", "heavy-window", "empty"],
)
def test_the_correct_fp8_emulation_passes(p):
    r = run_case(Fp8CurrentScaling(), p, RunConfig())
    assert r.status == Status.PASSED, [v.message for v in r.verdicts if not v.passed]


def test_the_emulation_reports_the_amax_of_what_it_stored():
    k = Fp8CurrentScaling()
    x = make_inputs(small(seed=9))
    out = k.run(x)
    for n in ("o", "dq", "dk", "dv"):
        got = out.get(n)
        assert fp8.pow2_scale(k.amax[n], E4) == k.scales[n]
        # the stored tensor's own amax is the reported one rounded into the format
        assert got.abs().max().item() == pytest.approx(k.amax[n], rel=EPS[E4])


def test_there_are_fp8_mutants():
    assert len(FP8_MUTANTS) >= 2


@pytest.mark.parametrize("name", FP8_MUTANTS)
def test_each_fp8_mutant_fails_its_example_where_the_emulation_passes(name):
    m = catalogue.MUTANTS[name]
    assert m.example.dtype in FP8_DTYPES and m.make_clean().name == "fp8-current-scaling"
    clean = run_case(m.make_clean(), m.example, RunConfig())
    assert clean.status == Status.PASSED, [v.message for v in clean.verdicts if not v.passed]
    bad = run_case(m.make(), m.example, RunConfig())
    assert bad.status != Status.PASSED and any(g.endswith(":budget") for g in bad.failed_gates), bad.failed_gates
