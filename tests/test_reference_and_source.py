"""--truth float32 (the reference a team's standard is stated against) and the
forward-or-backward attribution of a failing backward output."""

import pytest
import torch

from difftest import Problem, make_inputs
from difftest.judge.gates import GateConfig, Standard
from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.kernels.mutants import MUTANTS
from difftest.oracles.chunked import chunked_reference
from difftest.oracles.own_stats import own_stats_backward
from tests.kernels_for_tests import RefKernel

# A precision standard as a kernel team states one (TileLang's for its attention backward): fp16
# atol 6.10e-5, rtol 1.95e-3, max_abs 0.1, required ratio 0.99, against a float32 golden,
# all backward outputs blocking
SEED_001 = Standard(atol=6.10e-5, rtol=1.95e-3, max_abs=0.1, required_ratio=0.99)
SEED_001_CONFIG = RunConfig(
    truth="float32", gates=GateConfig(standards={n: SEED_001 for n in ("o", "dq", "dk", "dv", "dsink")})
)


def _v(case, output, gate):
    return next(v for v in case.verdicts if v.output == output and v.gate == gate)


def test_seed_001_standard_passes_a_correct_kernel_against_the_float32_truth():
    p = Problem(
        batch=2,
        seqlen_q=48,
        seqlen_k=64,
        heads_q=4,
        heads_kv=2,
        head_dim_qk=32,
        head_dim_v=32,
        dtype="float16",
        causal=True,
        sinks=True,
    )
    case = run_case(BlockwiseAttention(), p, SEED_001_CONFIG)
    assert case.status == "passed", case.render()
    for n in ("o", "dq", "dk", "dv", "dsink"):
        assert _v(case, n, "elementwise").reference == "float32 truth"
        assert _v(case, n, "budget").reference.startswith("float64 truth")  # the budget keeps float64
    assert all(v.reference for v in case.verdicts)  # every verdict names its reference


def test_seed_001_standard_fails_the_first_16_rows_of_dq_mutant():
    m = MUTANTS["dq-first-16-rows"]
    assert run_case(BlockwiseAttention(), m.example, SEED_001_CONFIG).status == "passed"
    case = run_case(m.make(), m.example, SEED_001_CONFIG)
    v = _v(case, "dq", "elementwise")
    assert not v.passed and v.numbers["within_ratio"] < 0.99 and v.reference == "float32 truth"
    assert "vs the float32 truth" in v.message


def test_the_standard_really_uses_the_float32_truth():
    # the float32 reference as a kernel on a float32 problem equals the float32 truth bit for bit
    p = Problem(seqlen_q=16, seqlen_k=24, head_dim_qk=16, head_dim_v=16, dtype="float32")
    std = GateConfig(standards={"dq": Standard(atol=0.0, rtol=0.0)})
    f32 = run_case(RefKernel(), p, RunConfig(truth="float32", gates=std))
    f64 = run_case(RefKernel(), p, RunConfig(gates=std))
    assert _v(f32, "dq", "elementwise").numbers["err"] == 0.0 and _v(f32, "dq", "elementwise").passed
    assert _v(f64, "dq", "elementwise").numbers["err"] > 0.0 and not _v(f64, "dq", "elementwise").passed
    assert _v(f64, "dq", "elementwise").reference == "float64 truth"


@pytest.mark.parametrize(
    "sq, sk",
    [
        ((7, 20), (5, 9)),
        # queries that see no key and keys no query sees: sized views (the
        # reference raised on a 0-key sequence, so a failing FP8 dSink of such a
        # problem was never judged against its own statistics)
        ((7, 0, 5), (0, 4, 3)),
    ],
)
def test_own_statistics_reference_with_exact_statistics_is_the_truth(sq, sk):
    p = Problem(
        batch=len(sq),
        seqlen_q=sq,
        seqlen_k=sk,
        heads_q=4,
        heads_kv=2,
        causal=True,
        sinks=True,
        pad_tail=3,
        dtype="float16",
    ).validate()
    x = make_inputs(p)
    t = chunked_reference(x)
    own = own_stats_backward(x, t.o, t.lse, max_chunk_elements=4 * 9)  # several chunks per sequence
    for n in ("dq", "dk", "dv", "dsink"):  # the LSE is stored in float32: P to ~|LSE| eps32
        assert torch.allclose(own.get(n).double(), t.get(n).double(), rtol=0, atol=1e-6), n


def test_wrong_forward_statistics_are_attributed_to_the_forward():
    m = MUTANTS["sink-missing-in-forward"]
    case = run_case(m.make(), m.example)
    for n in ("dq", "dk", "dv", "dsink"):
        v = _v(case, n, "budget")
        assert not v.passed and v.numbers["source"] == "forward", v.message
        assert "source: the forward statistics" in v.message


def test_a_wrong_backward_is_attributed_to_the_backward():
    for name, outputs in (
        ("dq-double-scale", ("dq",)),
        ("dk-missing-scale", ("dk",)),
        # the returned LSE is right; the backward reads the saved statistics
        # at the wrong rows: the backward's own fault
        ("lse-batch-offset-missing", ("dq", "dk", "dv")),
    ):
        m = MUTANTS[name]
        case = run_case(m.make(), m.example)
        for n in outputs:
            v = _v(case, n, "budget")
            assert not v.passed and v.numbers["source"] == "backward", (name, v.message)
        assert all("source" not in v.numbers for v in case.verdicts if v.passed)


class NoForwardStats(RefKernel):
    """Returns no O/LSE and a wrong dQ: nothing to rebuild its backward from."""

    def corrupt(self, inputs, out):
        out.o, out.lse, out.dq = None, None, out.dq * 2
        return out


def test_without_forward_statistics_the_source_is_unknown():
    case = run_case(NoForwardStats(), Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=8, head_dim_v=8))
    assert _v(case, "dq", "budget").numbers["source"] == "unknown"


def test_cli_truth_option_reaches_the_run_config():
    from difftest.commands.cli import build_parser
    from difftest.commands.run import config_from_args

    argv = ["run", "--truth", "float32", "--standard", "dq:atol=6.1e-5,rtol=1.95e-3,ratio=0.99,max_abs=0.1"]
    cfg = config_from_args(build_parser(argv).parse_args(argv))
    assert cfg.truth == "float32" and cfg.gates.standards["dq"].required_ratio == 0.99
    argv = ["run"]
    assert config_from_args(build_parser(argv).parse_args(argv)).truth == "float64"
