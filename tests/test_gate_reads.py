"""Gates read few values back to the host: on a GPU every ``float()``/``.item()`` of a
tensor is a device synchronisation, and a case used to make ~76 of them. The
reads are counted structurally (a torch function mode), so the test runs on the CPU; the
verdicts the batched reads produce are the ones tests/test_gates.py checks."""

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from difftest import Problem, make_inputs
from difftest.judge.gates import check_outputs, nonfinite_gate, poison_gate
from difftest.model.outputs import Outputs
from difftest.oracles.reference import reference

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__", "cpu", "numpy", "nonzero")


class HostReads(TorchFunctionMode):
    """Python-level reads (``float(t)``, ``t.tolist()`` ...) and, through a dispatch mode,
    the ones torch makes inside an op: ``t[i]`` with a tensor index reads ``i``
    (``_local_scalar_dense``), a boolean mask or ``nonzero`` reads the count."""

    def __init__(self):
        super().__init__()
        self.calls = []
        outer = self

        class Inner(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func.overloadpacket.__name__)
                if name in ("_local_scalar_dense", "nonzero"):
                    outer.calls.append(f"aten.{name}")
                return func(*args, **(kwargs or {}))

        self.inner = Inner()

    def __enter__(self):
        self.inner.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self.inner.__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


P = Problem(
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
).validate()


def _poisoned_good():
    x = make_inputs(P)
    truth, ref, good = reference(x, "float64"), reference(x, "same"), reference(x, "float32")
    buf = Outputs.poisoned(P, torch.float16)
    for n, t in good.items():
        buf.get(n).copy_(t)
    return buf, truth, ref


def test_a_passing_case_reads_at_most_five_values_per_output():
    got, truth, ref = _poisoned_good()
    with HostReads() as hr:
        vs = check_outputs(P, got, truth, ref, poisoned=True, yardstick=ref)
    outputs = {v.output for v in vs}
    assert outputs == {"o", "lse", "dq", "dk", "dv", "dsink"} and all(v.passed for v in vs)
    # per output: poison, the budget's bounds, nonfinite, budget; one more for the logit
    # magnitude. The gates read ~76 values before.
    bools = hr.calls.count("__bool__")  # each also shows as one aten._local_scalar_dense
    reads = len(hr.calls) - 2 * bools
    assert hr.calls.count("aten._local_scalar_dense") >= bools and "aten.nonzero" not in hr.calls, hr.calls
    assert reads <= 4 * len(outputs) + 1, hr.calls
    # plus the host-only shortcuts (``if not x.is_cuda and not bool(x.any())``), skipped on a GPU
    assert hr.calls.count("__bool__") <= 2 * len(outputs), hr.calls


def test_failures_are_still_located_with_one_more_read():
    got, truth, ref = _poisoned_good()
    got.dv[5, 0, 3] = float("nan")
    with HostReads() as hr:
        v = nonfinite_gate(P, "dv", got.dv.double(), truth.dv, torch.float16)
    assert not v.passed and v.worst["token"] == 5 and v.worst["head"] == 0 and v.worst["dim"] == 3
    assert v.worst["got"] != v.worst["got"]  # the NaN itself
    assert hr.calls.count("tolist") == 2 and len(hr.calls) - 2 * hr.calls.count("__bool__") == 2, hr.calls
    fresh = Outputs.poisoned(P, torch.float16).dq
    with HostReads() as hr:
        v = poison_gate(P, "dq", fresh)
    assert not v.passed and v.numbers["unwritten"] == v.numbers["elements"] and v.worst["token"] == 0
    assert hr.calls == ["tolist", "tolist"], hr.calls
