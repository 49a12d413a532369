"""``check_outputs`` reads every output's numbers in one transfer (``_Judged``), and judges an
output the long way (``_judge_output``: the dtype-limit rule, each gate reading its own
numbers) only where an element is left to that rule or a standard applies. Both ways give
the same verdicts bit for bit: here every output is judged both ways, on outputs that pass,
that exceed the budget, that hold NaN, infinities, saturated values, poison or -inf LSE rows,
and on Problems with GQA, sinks, empty sequences and unused tail rows."""

import json

import pytest
import torch

from difftest import Problem, make_inputs
from difftest.judge import gates
from difftest.judge.gates import GateConfig, Standard, check_outputs
from difftest.model.outputs import Outputs
from difftest.oracles import references

PROBLEMS = [
    Problem(
        batch=2,
        seqlen_q=24,
        seqlen_k=40,
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float16",
        causal=True,
        sinks=True,
        seed=3,
    ),
    Problem(
        batch=3,
        seqlen_q=(5, 0, 9),
        seqlen_k=(7, 4, 0),
        heads_q=2,
        heads_kv=1,
        head_dim_qk=8,
        head_dim_v=16,
        dtype="bfloat16",
        pad_tail=3,
        seed=5,
    ),
    Problem(
        seqlen_q=12,
        seqlen_k=12,
        heads_q=2,
        heads_kv=2,
        head_dim_qk=32,
        head_dim_v=32,
        dtype="float32",
        window_left=2,
        window_right=1,
        seed=7,
    ),
]


def _good(p):
    """A correct kernel's outputs, in poisoned buffers as a kernel writing into them leaves them."""
    x = make_inputs(p)
    refs = references(x)
    out = Outputs.poisoned(p, x.q.dtype)
    for n, t in refs.flash.items():
        out.get(n).copy_(t)
    return x, refs, out


def _spoil(p, refs, out, how):
    rows = p.total_q - p.pad_tail
    if how == "limited":  # an infinity where the flash-style yardstick overflows too: accepted (rule a)
        out.o.view(-1)[1] = float("inf")
        refs.flash.o.view(-1)[1] = float("inf")
    if how == "noise":
        out.dq.add_(out.dq.abs().max().float() * 0.05)
    elif how == "nan":
        out.dv.view(-1)[3] = float("nan")
    elif how == "inf":
        out.o.view(-1)[1] = float("inf")
        out.dk.view(-1)[0] = -float("inf")
    elif how == "saturated":
        out.o.view(-1)[2] = torch.finfo(out.o.dtype).max
    elif how == "poison":
        out.dq[:rows] = Outputs.poisoned(p, out.dq.dtype).dq[:rows]
    elif how == "lse":
        out.lse[0] = float("-inf")
    return out


def _verdicts(p, x, refs, out, config, long_way: bool, monkeypatch):
    if long_way:
        monkeypatch.setattr(gates._Judged, "__init__", _all_long(gates._Judged.__init__))
    try:
        return [
            v.to_dict()
            for v in check_outputs(
                p,
                out,
                refs.truth,
                refs.yardsticks,
                config,
                poisoned=True,
                expected=("o", "lse", "dq", "dk", "dv", "dsink"),
                yardstick=refs.flash,
                inputs=x,
            )
        ]
    finally:
        monkeypatch.undo()


def _all_long(init):
    def wrapped(self, *a, **kw):
        kw["quick"] = False
        init(self, *a, **kw)

    return wrapped


@pytest.mark.parametrize("how", ["good", "noise", "nan", "inf", "saturated", "poison", "lse", "limited"])
@pytest.mark.parametrize("i", range(len(PROBLEMS)))
def test_one_read_and_the_long_way_give_the_same_verdicts(i, how, monkeypatch):
    p = PROBLEMS[i].validate()
    x, refs, out = _good(p)
    out = _spoil(p, refs, out, how)
    config = GateConfig(standards={"dv": Standard()}) if how == "noise" else GateConfig()
    quick = _verdicts(p, x, refs, out, config, False, monkeypatch)
    long = _verdicts(p, x, refs, out, config, True, monkeypatch)
    assert json.dumps(quick, default=str) == json.dumps(long, default=str)  # NaN equals NaN here
    if how == "good":
        assert all(v["passed"] for v in quick)
    elif how in ("noise", "nan", "poison"):
        assert not all(v["passed"] for v in quick)
    elif how == "limited":
        assert any(v["numbers"].get("overflow_limited") for v in quick)


def test_a_passing_case_reads_once():
    p = PROBLEMS[0].validate()
    x, refs, out = _good(p)
    reads = []
    real = torch.Tensor.tolist
    try:
        torch.Tensor.tolist = lambda self: reads.append(1) or real(self)
        vs = check_outputs(p, out, refs.truth, refs.yardsticks, poisoned=True, yardstick=refs.flash, inputs=x)
    finally:
        torch.Tensor.tolist = real
    assert all(v.passed for v in vs) and len(vs) == 3 * 6
    assert len(reads) == 1
