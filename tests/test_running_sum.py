"""A correct design that adds dK/dV into the output in the input dtype (torch's CPU flash
backward) is judged with its own yardstick (oracles/running_sum.py), where it declares it."""

import dataclasses

import pytest
import torch

from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.variants import InputDtypeRunningSum
from difftest.model.capability import Capability
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import chunked_reference, flash_style_reference, input_dtype_running_sum

# GQA 16/1 with a large dO: 16 heads x 8 query tiles of roundings at the group sum's magnitude
GROUPED = Problem(
    batch=1,
    seqlen_q=256,
    seqlen_k=145,
    heads_q=16,
    heads_kv=1,
    head_dim_qk=8,
    head_dim_v=8,
    dtype="float16",
    softmax_scale=0.01,
    values="large_do",
    value_scale=1.0,
)


def _dv_budget(result):
    return [v for v in result.verdicts if v.output == "dv" and v.gate.value == "budget"][0]


def test_the_design_passes_with_its_yardstick_and_only_with_it():
    declared = InputDtypeRunningSum()
    r = run_case(declared, GROUPED, RunConfig(isolate=False))
    assert r.status.value == "passed", r.reason
    assert any("input-dtype-running-sum" in n for n in r.notes)
    undeclared = InputDtypeRunningSum()
    undeclared.capability = dataclasses.replace(declared.capability, designs=())
    r = run_case(undeclared, GROUPED, RunConfig(isolate=False))
    assert r.failed_gates == ["dv:budget"], r.reason  # the false alarm the design's yardstick removes
    assert _dv_budget(r).numbers["ratio"] > 1


@pytest.mark.parametrize("softcap", [None, 2.0], ids=["uncapped", "softcap"])
def test_one_block_one_head_is_one_rounding_of_the_truth(softcap):
    """With one block and one head per group the running sum is the truth rounded once: the
    partials follow every Problem feature the truth does (the cap's 1 - tanh^2 included)."""
    p = Problem(
        batch=2,
        seqlen_q=24,
        seqlen_k=40,
        heads_q=2,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float16",
        causal=True,
        values="normal",
        softcap=softcap,
    )
    inputs = make_inputs(p)
    truth = chunked_reference(inputs, "float64")
    yard = input_dtype_running_sum(inputs, 64, flash_style_reference(inputs))
    for name in ("dk", "dv"):
        got, want = getattr(yard, name), getattr(truth, name).to(torch.float16)
        assert got.dtype == torch.float16
        torch.testing.assert_close(got.double(), want.double(), atol=0, rtol=2**-10)
    # smaller blocks round more often: the running sum drifts from the single rounding
    drift = input_dtype_running_sum(inputs, 1, flash_style_reference(inputs))
    assert not torch.equal(drift.dv, yard.dv)


def test_a_design_nobody_modelled_is_refused():
    with pytest.raises(ValueError, match="designs"):
        Capability(designs=("fp16-atomics",))
