"""The approximate-tanh softcap design (oracles/approx_tanh.py): FA4 caps logits with the GPU's
tanh.approx.f32, relative error up to 2^-11. The correct variant that caps with it failed the
budget gates 9 times in 1,422 CPU cases with no yardstick for it; a kernel declaring the design
is judged again with the design's yardstick where a budget gate fails, and a softcap fault still
fails there. The yardstick carries a floor, the tanh's bound propagated through the softmax and the
backward (``tanh_error_floor``): without it the variant still failed 4 of 5,106 CPU cases."""

import math
from dataclasses import replace

import pytest
import torch

from difftest.judge.gates import design_floor
from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.mutants import MUTANTS
from difftest.kernels.variants import VARIANTS
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import design_yardsticks, flash_style_reference, reference, references
from difftest.oracles.approx_tanh import BOUND, approx_tanh, tanh_error_floor

CAPPED = Problem(
    batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=8, head_dim_v=8, dtype="float32", softcap=1.0
)
SOFTCAP_MUTANTS = sorted(n for n, m in MUTANTS.items() if m.bug_class == "softcap")


# the problems of the false alarms the design's yardstick alone left (CPU variant catalogue, logged
# cases; the float16 one shrunk): bfloat16 O at a cap of 1000 on outlier channels x 256, where a
# capped logit's error reaches cap * 2^-11 = 0.5; float32 dQ at a cap of 30; float16 dQ/dK under large dO
FALSE_ALARMS = {
    "bf16-o-cap1000-outliers256": dict(
        batch=2,
        seqlen_q=[3, 3],
        seqlen_k=[6, 3],
        heads_q=8,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="bfloat16",
        softcap=1000.0,
        values="outlier_channels",
        value_scale=256.0,
        sinks=True,
        layout="kv_broadcast",
        pad_tail=1,
        window_left=1,
        window_right=0,
        align="top_left",
        seed=1561237364,
    ),
    "f32-dq-cap30": dict(
        batch=4,
        seqlen_q=2,
        seqlen_k=88,
        heads_q=14,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="float32",
        softcap=30.0,
        align="bottom_right",
        layout="misaligned",
        seed=139999456,
    ),
    "f16-dqdk-cap15-large-do": dict(
        batch=1,
        seqlen_q=[200],
        seqlen_k=[112],
        heads_q=2,
        heads_kv=2,
        head_dim_qk=64,
        head_dim_v=64,
        dtype="float16",
        softcap=15.0,
        softmax_scale=4.640683366495035,
        values="large_do",
        value_scale=4.0,
        causal=True,
        window_left=16,
        layout="do_transposed",
        seed=1,
    ),
}
# a float32 problem on which a tanh four times worse than the bound (2^-9) errs past the budget
WIDE_CAUGHT = Problem(
    batch=1,
    seqlen_q=8,
    seqlen_k=8,
    heads_q=2,
    heads_kv=1,
    head_dim_qk=32,
    head_dim_v=32,
    dtype="float32",
    softcap=30.0,
    values="outlier_channels",
    value_scale=4.0,
    seed=2,
)


def _variant(designs):
    v = VARIANTS["softcap-approx-tanh"].factory()
    v.capability = replace(v.capability, designs=designs)
    return v


class _WideTanh(type(VARIANTS["softcap-approx-tanh"].factory())):
    """The variant with a tanh four times worse than tanh.approx.f32's bound (14 bits cut: 2^-9)."""

    name = "wide-tanh"

    def cap_logits(self, p, s, scale, phase):
        t = approx_tanh(s, 14)
        return t * float(torch.tensor(p.softcap / math.log(2.0), dtype=torch.float32)), 1.0 - t * t


class _Perturbed(torch.autograd.Function):
    """tanh times (1 + eps) for a fixed eps per logit, the derivative 1 - t'^2 from that t'."""

    @staticmethod
    def forward(ctx, x, eps):
        t = torch.tanh(x) * (1 + eps)
        ctx.save_for_backward(t)
        return t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return grad * (1 - t * t), None


def test_the_approximate_tanh_errs_toward_zero_within_two_to_the_minus_eleven():
    x = torch.linspace(-20, 20, 100_001)
    t, a = torch.tanh(x), approx_tanh(x)
    rel = (a - t).abs() / t.abs().clamp_min(1e-30)
    assert rel.max() < 2.0**-11 and rel.max() > 2.0**-13  # the bound's size, not float32's rounding
    assert bool((a.abs() <= t.abs()).all())


def test_the_variant_fails_without_its_designs_yardstick_and_passes_with_it():
    bare = run_case(_variant(()), CAPPED, RunConfig(isolate=False))
    assert bare.status == "failed" and bare.worst_ratio > 100, bare.render()
    judged = run_case(_variant(("approximate-tanh-softcap",)), CAPPED, RunConfig(isolate=False))
    assert judged.status == "passed", judged.render()
    assert any("approximate-tanh-softcap" in n for n in judged.notes)


def test_no_cap_no_yardstick():
    inputs = make_inputs(CAPPED.replace(softcap=None))
    assert design_yardsticks(("approximate-tanh-softcap",), inputs, 64, flash_style_reference(inputs)) == []


@pytest.mark.parametrize("name", SOFTCAP_MUTANTS)
def test_a_softcap_fault_still_fails_where_the_design_is_declared(name):
    """The design's yardstick widens the budget by the approximate tanh's error only: each softcap
    mutant, declaring the design, still fails on its own example."""
    m = MUTANTS[name]
    k = m.make()
    k.capability = replace(k.capability, designs=("approximate-tanh-softcap",))
    bad = run_case(k, m.example, RunConfig(isolate=False))
    assert bad.status in ("failed", "error"), bad.render()


@pytest.mark.parametrize("how", ["toward", "away", "random"])
def test_the_floor_bounds_what_any_tanh_within_the_bound_does_to_every_output(how):
    """Sound: the float64 outputs with every logit's tanh moved by up to the bound (all toward zero,
    all away, or signs drawn at random: the spread the softmax does not cancel) differ from the truth
    by no more than ``tanh_error_floor``, at a cap where a logit moves by up to 0.5, with sinks and GQA
    (the floor is per element attainable to first order: signs chosen per logit against one element's
    terms; random signs fall far below it)."""
    p = Problem(
        batch=2,
        seqlen_q=[5, 7],
        seqlen_k=[9, 6],
        heads_q=4,
        heads_kv=2,
        head_dim_qk=8,
        head_dim_v=8,
        dtype="bfloat16",
        softcap=1000.0,
        values="outlier_channels",
        value_scale=256.0,
        sinks=True,
        causal=True,
        seed=3,
    )
    inputs = make_inputs(p)
    truth, floor = reference(inputs, "float64"), tanh_error_floor(inputs)
    gen = torch.Generator().manual_seed(0)
    sign = {"toward": -1.0, "away": 1.0}.get(how)

    def tanh(x):
        eps = torch.full_like(x, sign) if sign else torch.randint(0, 2, x.shape, generator=gen).to(x) * 2 - 1
        return _Perturbed.apply(x, eps * BOUND * 0.999)

    moved = reference(inputs, "float64", tanh=tanh)
    assert set(floor) == {"o", "lse", "dq", "dk", "dv", "dsink"}
    for name, f in floor.items():
        err = float((moved.get(name).double() - truth.get(name).double()).abs().max())
        assert err <= f, (name, err, f)
        if name == "lse" and sign:  # every logit moved the same way: LSE moves by the bound itself
            assert err >= 0.9 * f, (err, f)


@pytest.mark.parametrize("name", sorted(FALSE_ALARMS))
def test_the_false_alarms_the_yardstick_alone_left_pass_with_the_floor(name):
    judged = run_case(_variant(("approximate-tanh-softcap",)), Problem(**FALSE_ALARMS[name]), RunConfig(isolate=False))
    assert judged.status == "passed", judged.render()
    assert any("approximate-tanh-softcap" in n for n in judged.notes)


def test_a_tanh_four_times_worse_than_the_bound_is_caught():
    """The floor is the bound's, not a blanket: a tanh erring up to 2^-9 fails where the design's
    own variant passes."""
    wide = _WideTanh()
    wide.capability = replace(wide.capability, designs=("approximate-tanh-softcap",))
    bad = run_case(wide, WIDE_CAUGHT, RunConfig(isolate=False))
    assert bad.status == "failed", bad.render()
    assert run_case(_variant(("approximate-tanh-softcap",)), WIDE_CAUGHT, RunConfig(isolate=False)).status == "passed"


def test_only_the_designs_yardsticks_carry_a_floor():
    """A kernel that does not declare the design is judged with the plain yardsticks: no floor."""
    inputs = make_inputs(CAPPED.replace(seqlen_k=4, softcap=30.0))
    plain = references(inputs)
    assert all(design_floor(plain.yardsticks, n) == 0.0 for n in ("o", "lse", "dq", "dk", "dv"))
    designed = design_yardsticks(("approximate-tanh-softcap",), inputs, 64, plain.flash)
    assert all(design_floor(designed, n) > 0.0 for n in ("o", "lse", "dq", "dk", "dv"))
    assert (
        design_yardsticks(("input-dtype-running-sum",), inputs, 64, plain.flash)[0].__dict__.get("design_floor") is None
    )
