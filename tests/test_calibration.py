"""difftest calibrate: k_needed measured over correct kernels sits below the default k,
and a wrong kernel's k_needed is far above it (so calibrating on it would be visible)."""

from difftest.judge.gates import DEFAULT_K
from difftest.measure.calibration import collect, quantile, table
from tests.kernels_for_tests import RefKernel, WrongDkForLongGqa


def test_correct_kernel_needs_less_than_the_default_k():
    data = collect([RefKernel()], "quick", max_examples=8, seed=0)
    assert {out for _, out in data} >= {"o", "dq", "dk", "dv"}
    for (dtype, out), xs in data.items():
        assert max(xs) < DEFAULT_K[out], (dtype, out, max(xs))
    assert "float32" in table(data) and "p99" in table(data)


def test_wrong_kernel_needs_a_huge_k():
    data = collect([WrongDkForLongGqa()], "ci", max_examples=40, seed=0)
    worst = max(x for (dt, out), xs in data.items() if out == "dk" for x in xs)
    assert worst > 10 * DEFAULT_K["dk"]
    assert quantile([1, 2, 3, 4], 0.5) == 2 and quantile([5], 0.99) == 5


def test_calibrated_k_is_per_dtype_and_an_explicit_k_applies_to_every_dtype():
    from difftest.judge.gates import DEFAULT_K_BY_DTYPE, GateConfig
    from difftest.model.problem import FP8_DTYPES

    cfg = GateConfig()
    for dt, per_output in DEFAULT_K_BY_DTYPE.items():
        for out, k in per_output.items():
            assert cfg.k_for(dt, out) == k and 1.0 <= k
            assert dt in FP8_DTYPES or k <= DEFAULT_K[out]
    # FP8's wider k (its emulation's) never loosens what a config without a dtype states
    assert DEFAULT_K == {
        n: max(DEFAULT_K_BY_DTYPE[d][n] for d in ("float16", "bfloat16", "float32")) for n in DEFAULT_K
    }
    assert GateConfig(k={**DEFAULT_K, "dq": 4.0}).k_for("float32", "dq") == 4.0


def test_an_error_the_old_k_let_through_now_fails():
    """An fp16 dQ error of ~2.2x the yardstick (above the floor) passed k=3 and fails the
    calibrated fp16 dQ k of 1.5."""
    import torch

    from difftest import Problem, make_inputs
    from difftest.judge.gates import GateConfig, check_outputs
    from difftest.oracles.reference import reference

    p = Problem(
        batch=2, seqlen_q=24, seqlen_k=40, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=16, dtype="float16", seed=3
    ).validate()
    x = make_inputs(p)
    truth, ref, good = reference(x, "float64"), reference(x, "same"), reference(x, "float32")
    v = next(v for v in check_outputs(p, good, truth, ref) if v.label == "dq:budget")
    bad = good.clone()
    i = (0, 0, 0)
    bad.dq = good.dq.to(torch.float16)
    bad.dq[i] = float(truth.dq[i]) + v.numbers["floor"] + 2.2 * v.numbers["ref_err"]
    old = next(
        v for v in check_outputs(p, bad, truth, ref, GateConfig(k={**DEFAULT_K, "dq": 3.0})) if v.label == "dq:budget"
    )
    new = next(v for v in check_outputs(p, bad, truth, ref) if v.label == "dq:budget")
    assert 1.5 < new.numbers["k_needed"] < 3.0
    assert old.passed and not new.passed and new.numbers["k"] == 1.5


def test_calibrate_command_parses():
    from difftest.commands.cli import build_parser

    argv = ["calibrate", "-k", "torch-blockwise", "-p", "quick", "--detail", "d.json"]
    a = build_parser(argv).parse_args(argv)
    assert a.kernels == ["torch-blockwise"] and a.detail == "d.json"


# ----------------------------------------------------------------------------- deriving k from logs
FA_PROBLEM = (
    '{"batch": 3, "seqlen_q": [3, 1, 2], "seqlen_k": [3, 2, 5], "heads_q": 2, "heads_kv": 1, '
    '"head_dim_qk": 32, "head_dim_v": 32, "dtype": "float16", "values": "mixed_do", '
    '"value_scale": 1.0, "softmax_scale": 4.9375, "seed": 160, "input_version": 2}'
)


def _log(tmp_path, name, k_needed, problem=FA_PROBLEM, output="dk", dtype="float16"):
    import json

    path = tmp_path / f"{name}.jsonl"
    line = {
        "problem": problem,
        "dtype": dtype,
        "status": "passed",
        "failed": [],
        "budget": {output: [0.8, k_needed, True], "o": [0.1, 0.0, True]},
        "reason": "",
    }
    path.write_text(json.dumps(line) + "\n")
    return path


def test_derive_k_follows_the_shipped_rule():
    import math

    import pytest

    from difftest.measure.calibration import derive_k

    assert [derive_k(x) for x in (0.0, 0.25, 0.5, 0.597, 1.06)] == [1.0, 1.0, 1.0, 1.5, 2.5]
    with pytest.raises(ValueError):
        derive_k(math.nan)


def test_a_correct_fa_convention_case_does_not_raise_k_once_judged_as_the_verdicts_judge_it(tmp_path, capsys):
    """The FA problem's dK needs k 1.05 against the truth on a Delta-from-stored-O kernel; the
    shipped verdicts judge it against its own O/LSE, where it needs ~0, so it must not raise
    fp16 dK's k to 2.5 (it would with --replay 0)."""
    from difftest.commands.cli import main

    log = _log(tmp_path, "delta-from-stored-o", 1.2)
    assert main(["calibrate", "--from-variant-logs", str(log), "--replay", "0"]) == 0
    row = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| float16 | dk |")][0]
    assert row.split("|")[6].strip() == "2.5"
    assert main(["calibrate", "--from-variant-logs", str(log)]) == 0
    row = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| float16 | dk |")][0]
    assert row.split("|")[6].strip() == "1" and float(row.split("|")[4]) < 0.1


def test_an_fp8_output_is_replayed_against_the_tensor_core_yardstick_the_verdict_builds():
    """The FP8 LSE of a kernel adding like Hopper's FP8 MMA needs k ~30 against the float32-accumulator
    yardstick; the shipped verdict judges it with the tensor-core one too (the larger error), where it
    needs ~1, so calibration must not read the first number (it returned None: no own O/LSE for the LSE)."""
    from difftest.kernels.variants import VARIANTS
    from difftest.measure.calibration import effective_k_needed
    from difftest.model.problem import Problem

    p = Problem(seqlen_q=2, seqlen_k=1, head_dim_qk=128, head_dim_v=128, dtype="float8_e4m3fn")
    eff = effective_k_needed(VARIANTS["fp8-tensor-core-accumulator"].factory(), p, "lse")
    assert eff is not None and eff < 1.5


def test_derivation_inputs_are_hostile(tmp_path, capsys):
    import pytest

    from difftest.commands.cli import main

    bad = tmp_path / "x.jsonl"
    bad.write_text('{"problem": 1}\n')
    assert main(["calibrate", "--from-variant-logs", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "x.jsonl" in err and "line 1" in err and len(err.splitlines()) == 1
    rep = tmp_path / "report.json.xz"
    rep.write_bytes(b"not xz")
    assert main(["calibrate", "--from-reports", str(rep)]) == 2
    assert main(["calibrate"]) == 2  # neither kernels nor logs
    with pytest.raises(SystemExit) as e:  # argparse's own exit for a bad flag value
        main(["calibrate", "--from-variant-logs", str(bad), "--replay", "1001"])
    assert e.value.code == 2
