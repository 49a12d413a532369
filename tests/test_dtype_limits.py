"""Dtype limits: a non-finite or saturated kernel value is accepted (and counted as
overflow-limited) only where a correct kernel in that dtype can produce it; every other
one still fails.

The problems are crafted (fp16, dO magnitudes spread over 10^+-4.4, bisected softmax
scale) so that the true dQ peaks just below fp16's threshold (65459.9), far below it
(39676.6) or above it (70000.0)."""

import math

import pytest
import torch

from difftest import Capability, Problem, make_inputs
from difftest.judge.gates import dtype_limited, overflow_threshold
from difftest.judge.runner import run_case
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.kernels.mutants import MUTANTS
from difftest.model.draw import large_do_top
from difftest.model.problem import ProblemError
from difftest.oracles.chunked import chunked_reference
from difftest.oracles.flash_style import flash_style_reference
from difftest.strategies.values import SCALES, value_settings
from tests.drawing import draw_many
from tests.kernels_for_tests import InfAtLargestDq, NanAtLargestDq, RefKernel, SaturatedLargestDq

FP16_MAX = 65504.0


def _problem(softmax_scale):
    return Problem(
        seqlen_q=16,
        seqlen_k=16,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float16",
        values="mixed_do",
        value_scale=4.4,
        softmax_scale=softmax_scale,
        seed=1,
        input_version=1,
    ).validate()  # crafted against version 1's values


JUST_BELOW = _problem(10.236)  # max |dQ| = 65459.9
FAR_BELOW = _problem(6.0)  # max |dQ| = 39676.6
ABOVE = _problem(11.0364)  # max |dQ| = 70000.0


def _dq(case, gate):
    return next(v for v in case.verdicts if v.output == "dq" and v.gate == gate)


def _max_dq(p):
    return float(chunked_reference(make_inputs(p)).dq.abs().max())


def test_crafted_problems_sit_where_they_claim():
    assert overflow_threshold(torch.float16) == FP16_MAX
    assert 65400 < _max_dq(JUST_BELOW) < FP16_MAX
    assert 39000 < _max_dq(FAR_BELOW) < 40000
    assert _max_dq(ABOVE) > 65520  # rounds to inf in fp16


def test_inf_within_budget_of_the_threshold_passes_as_overflow_limited():
    case = run_case(InfAtLargestDq(), JUST_BELOW)
    assert case.status == "passed", case.render()
    nf, budget = _dq(case, "nonfinite"), _dq(case, "budget")
    assert nf.numbers["overflow_limited"] == 1 and budget.numbers["overflow_limited"] == 1
    assert "1 overflow-limited" in nf.message and "float16" in nf.message
    assert _max_dq(JUST_BELOW) + budget.numbers["limit"] >= FP16_MAX  # the rule it passed by


def test_inf_far_below_the_threshold_fails():
    case = run_case(InfAtLargestDq(), FAR_BELOW)
    assert case.status == "failed"
    nf = _dq(case, "nonfinite")
    assert not nf.passed and nf.numbers["mismatched"] == 1
    assert "overflow_limited" not in nf.numbers
    assert _max_dq(FAR_BELOW) + _dq(case, "budget").numbers["limit"] < FP16_MAX


def test_nan_where_truth_and_yardstick_are_finite_fails_even_at_the_threshold():
    flat_truth = chunked_reference(make_inputs(JUST_BELOW)).dq.reshape(-1)
    i = int(flat_truth.abs().argmax())
    assert torch.isfinite(flash_style_reference(make_inputs(JUST_BELOW)).dq.reshape(-1)[i])
    case = run_case(NanAtLargestDq(), JUST_BELOW)
    assert case.status == "failed"
    assert not _dq(case, "nonfinite").passed


def test_truth_beyond_the_threshold_is_counted_not_hidden():
    for kernel in (BlockwiseAttention(), RefKernel()):
        case = run_case(kernel, ABOVE)
        assert case.status == "passed", case.render()
        assert _dq(case, "nonfinite").numbers["overflow_limited"] >= 1


def test_saturated_value_is_judged_like_an_infinity():
    ok = run_case(SaturatedLargestDq(), JUST_BELOW)
    assert ok.status == "passed", ok.render()
    assert _dq(ok, "budget").numbers["overflow_limited"] == 1
    bad = run_case(SaturatedLargestDq(), FAR_BELOW)
    assert bad.status == "failed" and not _dq(bad, "budget").passed


def test_mutant_that_overflows_early_still_fails():
    m = MUTANTS["dq-cast-before-scale"]
    assert _max_dq(m.example) < FP16_MAX / 4  # the truth is far from the threshold
    assert run_case(BlockwiseAttention(), m.example).status == "passed"
    case = run_case(m.make(), m.example)
    assert case.status == "failed" and not _dq(case, "nonfinite").passed


def test_yardstick_rule():
    truth = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    inf, nan = float("inf"), float("nan")
    got = torch.tensor([nan, -inf, inf, nan], dtype=torch.float64)
    yard = torch.tensor([nan, inf, inf, 4.0], dtype=torch.float64)
    mask = dtype_limited(got, truth, yard, torch.float16, 10.0)
    # NaN where the yardstick is NaN: accepted; an infinity of the other sign than the
    # yardstick's: not; the same sign: accepted; NaN where the yardstick is finite: not
    assert mask.tolist() == [True, False, True, False]
    assert dtype_limited(got, truth, None, torch.float16, 10.0).tolist() == [False] * 4


# ----------------------------------------------------------------------------- large_do
# values="large_do" (input version 2): dO rows spread over value_scale decades up to the
# largest magnitude whose bounded normals stay finite in the dtype, so the gradients
# straddle fp16's threshold without any input being infinite (mixed_do had to stop at
# 10^4 in fp16, where dq-cast-before-scale survived the gpu profile).

NEAR = Problem(
    seqlen_q=16,
    seqlen_k=16,
    head_dim_qk=16,
    head_dim_v=16,
    dtype="float16",
    values="large_do",
    value_scale=5.0,
    seed=13,
).validate()


def test_large_do_inputs_stay_finite_at_every_scale_of_every_dtype():
    ladder, rng = SCALES["large_do"]
    for dt in ("float16", "bfloat16", "float32"):
        fmax = torch.finfo(getattr(torch, dt)).max
        for s in ladder + rng + (4.18, 37.9, 40.0, 300.0):
            p = Problem(
                seqlen_q=300,
                seqlen_k=5,
                heads_q=4,
                head_dim_qk=8,
                head_dim_v=64,
                dtype=dt,
                values="large_do",
                value_scale=s,
                seed=7,
            )
            x = make_inputs(p)
            for n in ("q", "k", "v", "do"):
                assert torch.isfinite(getattr(x, n)).all(), (dt, s, n)
            assert x.do.abs().max() < fmax
    # fp16 from 4.18 decades up: the largest dO element reaches close to 65504
    top = make_inputs(NEAR.replace(seqlen_q=300, head_dim_v=64)).do.abs().max().item()
    assert 0.6 * FP16_MAX < top <= FP16_MAX
    assert large_do_top("float16", 8.0) == large_do_top("float16", 4.5) < FP16_MAX / 4.3


def test_large_do_needs_input_version_2():
    with pytest.raises(ProblemError, match="input_version 2"):
        NEAR.replace(input_version=1).validate()


def test_strategy_draws_large_do_for_16_bit_dtypes_up_to_the_top():
    for dt in ("float16", "bfloat16"):
        got = draw_many(value_settings(Capability(dtypes=(dt,)), dt), 300)
        scales = [s for kind, s in got if kind == "large_do"]
        assert scales and max(scales) >= 4.18, dt  # fp16: the top row at 65504 / 4.32


def test_budget_stays_finite_on_large_do_at_the_top():
    for dt in ("float16", "bfloat16"):
        case = run_case(BlockwiseAttention(), NEAR.replace(dtype=dt, value_scale=8.0))
        assert case.status == "passed", case.render()
        for v in case.verdicts:
            if v.gate == "budget":
                assert math.isfinite(v.numbers["limit"]) and math.isfinite(v.numbers["floor"]), v.message


def test_correct_kernels_pass_and_cast_before_scale_fails_near_the_threshold():
    x = make_inputs(NEAR)
    truth, yard = chunked_reference(x).dq, flash_style_reference(x).dq
    # some true dQ is representable but dQ / scale is not, and the yardstick holds it finite
    window = (truth.abs() > NEAR.scale * FP16_MAX) & (truth.abs() < FP16_MAX) & torch.isfinite(yard)
    assert window.any() and torch.isfinite(x.do).all()
    for kernel in (BlockwiseAttention(), RefKernel()):
        assert run_case(kernel, NEAR).status == "passed"
    case = run_case(MUTANTS["dq-cast-before-scale"].make(), NEAR)
    assert case.status == "failed" and not _dq(case, "nonfinite").passed


# ----------------------------------------------------------------------------- dS at the overflow edge
# A flash kernel stores dS in the input dtype, so a |dS| at fp16's rounding edge (65520) makes the
# dK row it feeds infinite though the true dK is small. Found on the H200 (a seeded
# gpu campaign): our TileLang kernel's dK row was inf where the float64 |dS| was 65524.4 and the flash-style
# yardstick's 65506.6 (finite), and the gate called a correct kernel wrong. Crafted here: one query,
# two keys with equal scores (P = 1/2 exactly), V rows of ones and zeros (O = 1/2 exactly), dO
# summing to 262048: dS = +-65512 exactly, stored as 65504 by this rounding, as +-inf by a correct
# kernel whose stored O is one ulp lower (Delta 64 smaller). Halving dO halves dS: far from the edge.

EDGE = Problem(seqlen_q=1, seqlen_k=2, head_dim_qk=8, head_dim_v=8, dtype="float16").validate()


def _edge_inputs(do_scale: float):
    import dataclasses

    x = make_inputs(EDGE)
    h = torch.float16
    do = torch.tensor([32768.0] * 7 + [32672.0], dtype=h) * do_scale
    v = torch.stack([torch.ones(8, dtype=h), torch.zeros(8, dtype=h)])
    return dataclasses.replace(
        x, q=torch.full_like(x.q, 0.0625), k=torch.full_like(x.k, 0.5), v=v.view(2, 1, 8), do=do.view(1, 1, 8)
    )


@pytest.mark.parametrize("do_scale, at_edge", [(1.0, True), (0.5, False)], ids=["dS-at-the-edge", "dS-half-of-it"])
def test_an_infinite_dk_row_is_accepted_only_where_a_correct_kernels_ds_may_overflow(do_scale, at_edge):
    from difftest.judge.gates import check_outputs
    from difftest.oracles import references

    x = _edge_inputs(do_scale)
    refs = references(x)
    assert torch.isfinite(refs.flash.dk).all() and torch.isfinite(refs.truth.dk).all()
    assert float(refs.truth.dk.abs().max()) < FP16_MAX / 40  # dK is far from the threshold, its dS at it
    got = refs.flash.clone()
    got.dk[0] = float("inf")  # the row a dS of +-65512 (32756) feeds, as a kernel storing that dS as inf has it
    verdicts = check_outputs(EDGE, got, refs.truth, refs.yardsticks, yardstick=refs.flash, inputs=x)
    nf = next(v for v in verdicts if v.output == "dk" and v.gate == "nonfinite")
    assert nf.passed == at_edge, nf.message
    if at_edge:
        assert nf.numbers["overflow_limited"] == 8 and "overflow edge" in nf.message
    assert refs.flash.overflow_edge["dk"].view(-1).tolist() == [at_edge, at_edge]  # both keys' dS: +-65512


def test_the_ds_edge_is_modelled_for_fp16_only():
    """bfloat16's edge is float32's own range (a dS there is non-finite in the yardstick already):
    its yardstick skips the band's score-sized passes."""
    import dataclasses

    for dtype, modelled in (("float16", True), ("bfloat16", False), ("float32", False)):
        p = dataclasses.replace(EDGE, dtype=dtype).validate()
        assert (flash_style_reference(make_inputs(p)).overflow_edge is not None) == modelled, dtype
