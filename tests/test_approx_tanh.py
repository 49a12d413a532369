"""The approximate-tanh softcap design (oracles/approx_tanh.py): FA4 caps logits with the GPU's
tanh.approx.f32, relative error up to 2^-11. The correct variant that caps with it failed the
budget gates 9 times in 1,422 CPU cases with no yardstick for it; a kernel declaring the design
is judged again with the design's yardstick where a budget gate fails, and a softcap fault still
fails there."""

from dataclasses import replace

import pytest
import torch

from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.mutants import MUTANTS
from difftest.kernels.variants import VARIANTS
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import design_yardsticks, flash_style_reference
from difftest.oracles.approx_tanh import approx_tanh

CAPPED = Problem(
    batch=1, seqlen_q=1, seqlen_k=1, heads_q=1, heads_kv=1, head_dim_qk=8, head_dim_v=8, dtype="float32", softcap=1.0
)
SOFTCAP_MUTANTS = sorted(n for n, m in MUTANTS.items() if m.bug_class == "softcap")


def _variant(designs):
    v = VARIANTS["softcap-approx-tanh"].factory()
    v.capability = replace(v.capability, designs=designs)
    return v


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
