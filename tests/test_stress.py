"""Race stress: a race that fires once in 40 calls passes the campaign's 2-call determinism
gate and is caught by 100 repetitions; a reordering race in a kernel that does not claim
determinism passes (its reruns are right), a lost update fails (a rerun is wrong), also when
an earlier differing repetition was right (every differing repetition is judged).

``difftest stress`` (difftest/investigate/stress.py): the same through the command line, with the
kernel in the isolation worker (a crash in a later repetition is that problem's result), the
results written per problem, and every numeric flag bounded."""

import ctypes
import dataclasses
import json

import pytest
import torch

from difftest.commands import cli
from difftest.judge.determinism import RunTally
from difftest.judge.runner import run_case
from difftest.judge.stress import run_bytes, stress_case, stress_problems
from difftest.kernels.blockwise import CAPABILITY, BlockwiseAttention
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem

EVERY = 40
P = Problem(batch=1, seqlen_q=70, seqlen_k=70, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16)


class Racy(BlockwiseAttention):
    """dQ tiles are added in another order on every EVERY-th call (as atomics finishing in
    another order would); ``lose``: that call drops the last tile instead (a lost update)."""

    name = "racy-test-kernel"
    lose = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def reduce_dq(self, acc, parts):
        self.calls += 1
        if self.calls % EVERY:
            return super().reduce_dq(acc, parts)
        lose = self.lose if self.lose_from is None else self.calls >= self.lose_from
        parts = parts[:-1] if lose else list(reversed(parts))
        for r0, r1, part in parts:
            acc[:, r0:r1] += part

    lose_from = None  # lose the update from this call on (earlier races only reorder)


class RacyClaims(Racy):
    """Claims determinism; its race fires on calls 40, 80, ...: ``difftest stress -k`` spec."""

    name, spec = "racy-claims", "tests.test_stress:RacyClaims"
    capability = dataclasses.replace(CAPABILITY, deterministic=True)


class RacyHarmless(RacyClaims):
    """Does not claim determinism; its race only reorders a sum (every repetition is right)."""

    name, spec = "racy-harmless", "tests.test_stress:RacyHarmless"
    capability = dataclasses.replace(CAPABILITY, deterministic=False)


class RacyLaterLoses(RacyHarmless):
    """Does not claim determinism; call 40 reorders (right), call 80 loses a tile (wrong)."""

    name, spec, lose_from = "racy-later-loses", "tests.test_stress:RacyLaterLoses", 2 * EVERY


class CrashesOnThirdCall(BlockwiseAttention):
    """Right twice, then a segfault (a race that corrupts a pointer, say)."""

    name, spec = "crashes-third-call", "tests.test_stress:CrashesOnThirdCall"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def backward(self, inputs, fwd, ctx, out=None):
        self.calls += 1
        if self.calls == 3:
            ctypes.string_at(0)
        return super().backward(inputs, fwd, ctx, out)


def _racy(claims: bool, lose: bool = False):
    k = Racy()
    k.lose = lose
    k.capability = dataclasses.replace(CAPABILITY, deterministic=claims)
    return k


def _reorders_bits():
    """The reordered sum changes bits on P (else the test proves nothing)."""
    a, b = _racy(True), _racy(True)
    b.calls = EVERY - 1
    from difftest.model.inputs import make_inputs

    x = make_inputs(P)
    fa, ca = a.forward(x)
    fb, cb = b.forward(x)
    return not torch.equal(a.backward(x, fa, ca).dq, b.backward(x, fb, cb).dq)


def test_the_race_changes_bits():
    assert _reorders_bits()


def test_two_calls_miss_the_race_and_a_hundred_repetitions_catch_it():
    assert run_case(_racy(True), P).status.value == "passed"  # the campaign's 2 calls
    got = stress_case(_racy(True), P, reps=100, load=1, load_size=64)
    assert got.case.status.value == "failed"
    assert got.differing["dq"] > 0 and got.differing["dk"] == 0
    assert [(v.output, v.gate.value) for v in got.case.verdicts if not v.passed] == [("dq", "determinism")]
    assert got.load_ops > 0 and got.reps == 100 and "100 repetitions" in got.line()


def test_a_kernel_without_the_claim_passes_a_harmless_race_and_fails_a_lost_update():
    ok = stress_case(_racy(False), P, reps=100, load=0)
    assert ok.case.status.value == "passed" and ok.differing["dq"] > 0, ok.line()
    bad = stress_case(_racy(False, lose=True), P, reps=100, load=0)
    assert bad.case.status.value == "failed", bad.line()
    assert any("run" in v.message for v in bad.case.verdicts if not v.passed)


def test_a_deterministic_kernel_passes_stress():
    got = stress_case(BlockwiseAttention(), P, reps=100, load=1, load_size=64)
    assert got.case.status.value == "passed" and not any(got.differing.values()), got.line()


def test_stress_problems_are_large_batch_inside_the_capability():
    ps = stress_problems(CAPABILITY)
    assert ps and all(CAPABILITY.excludes(p) is None for p in ps)
    assert {p.batch for p in ps} == {min(60, CAPABILITY.max_batch)} and {p.causal for p in ps} == {False, True}


def test_the_tally_judges_every_differing_repetition_and_counts_them_per_output():
    x = make_inputs(P)
    k = BlockwiseAttention()
    first = k.run(x)
    other = first.clone()
    other.dq = other.dq.clone()
    other.dq[0, 0, 0] += 1.0
    judged = []

    def judge(out):
        judged.append(out)
        return []

    tally = RunTally(P, first, judge)
    for run in (first.clone(), other, first.clone(), other):
        tally.add(run)
    assert len(judged) == 2 and all(j is other for j in judged) and tally.judged == 2
    got = {v.output: v.numbers for v in tally.verdicts()}
    assert got["dq"]["differing"] == 1 and got["dq"]["differing_runs"] == 2 and got["dq"]["runs"] == 5
    assert got["dk"]["differing"] == 0 and got["dk"]["differing_runs"] == 0


def test_a_wrong_repetition_after_a_right_differing_one_fails():
    got = stress_case(RacyLaterLoses(), P, reps=100, load=0)
    assert got.case.status.value == "failed", got.line()
    assert got.differing_reps["dq"] == 2  # calls 40 and 80 differ
    bad = [v for v in got.case.verdicts if not v.passed]
    assert bad and all(v.numbers.get("run") == 80 and v.numbers.get("failing_reruns") == 1 for v in bad)


def test_repetitions_arrive_in_chunks_and_are_all_compared():
    one = run_bytes(P)
    got = stress_case(_racy(True), P, reps=100, load=0, chunk_bytes=3 * one)  # 33 chunks of at most 3
    assert got.reps == 100 and got.differing_reps["dq"] == 2 and got.case.status.value == "failed"


def main_rc(argv) -> int:
    """cli.main's exit code, argparse's own refusals (SystemExit) included."""
    try:
        return cli.main(argv)
    except SystemExit as e:
        return e.code


def _stress(tmp_path, capsys, *args):
    rc = cli.main(
        [
            "stress",
            "--out",
            str(tmp_path / "out"),
            "--batch",
            "1",
            "--heads",
            "2",
            "--seqlen",
            "70",
            "--head-dim",
            "16",
            "--dtype",
            "float32",
            "--load-size",
            "32",
            "-q",
            *map(str, args),
        ]
    )
    cap = capsys.readouterr()
    doc = (
        json.loads((tmp_path / "out" / "stress.json").read_text())
        if (tmp_path / "out" / "stress.json").exists()
        else None
    )
    return rc, cap, doc


def test_stress_command_fails_a_kernel_claiming_determinism_that_differs_once_in_50(tmp_path, capsys):
    rc, cap, doc = _stress(tmp_path, capsys, "-k", RacyClaims.spec, "--reps", 50, "--no-isolate")
    assert rc == 1, cap.err
    first = doc["results"][0]
    assert first["status"] == "failed" and first["reps"] == 50 and first["load_ops"] > 0
    assert first["differing"]["dq"]["reps"] == 1 and first["differing"]["dq"]["elements"] > 0
    assert first["differing"]["dk"] == {"elements": 0, "reps": 0}
    assert "dq:determinism" in first["case"]["failed_gates"]
    md = (tmp_path / "out" / "stress.md").read_text()
    assert "dq" in md and "in 1" in md and "reps/s" in cap.out


def test_stress_command_passes_a_kernel_without_the_claim_whose_differing_reps_are_right(tmp_path, capsys):
    rc, cap, doc = _stress(tmp_path, capsys, "-k", RacyHarmless.spec, "--reps", 50, "--load", 0, "--no-isolate")
    assert rc == 0, cap.out + cap.err
    assert doc["results"][0]["differing"]["dq"]["reps"] == 1 and doc["results"][0]["status"] == "passed"
    assert doc["results"][0]["load_ops"] == 0


def test_stress_command_on_torch_blockwise_passes(tmp_path, capsys):
    rc, cap, doc = _stress(tmp_path, capsys, "-k", "torch-blockwise", "--reps", 4, "--load", 0, "--no-isolate")
    assert rc == 0 and len(doc["results"]) == 2 and {r["status"] for r in doc["results"]} == {"passed"}
    assert all(not any(d["elements"] for d in r["differing"].values()) for r in doc["results"])


def test_a_crash_in_a_later_repetition_is_that_problems_result(tmp_path, capsys):
    one = tmp_path / "p.json"
    one.write_text(json.dumps({"problem": P.to_dict()}))
    rc = cli.main(
        [
            "stress",
            "-k",
            CrashesOnThirdCall.spec,
            "--reps",
            "5",
            "--load",
            "0",
            "--problem",
            str(one),
            "--out",
            str(tmp_path / "out"),
            "-q",
        ]
    )
    cap = capsys.readouterr()
    doc = json.loads((tmp_path / "out" / "stress.json").read_text())
    assert rc == 1, cap.err
    assert [r["status"] for r in doc["results"]] == ["error"] and "error" in cap.out
    reason = doc["results"][0]["case"]["reason"]
    assert "repetition 2..5 of 5" in reason and "SIGSEGV" in reason, reason
    assert doc["results"][0]["reps"] == 1


def test_time_budget_stops_between_problems(tmp_path, capsys):
    rc, cap, doc = _stress(
        tmp_path, capsys, "-k", "torch-blockwise", "--reps", 2, "--load", 0, "--no-isolate", "--time-budget", "1e-9"
    )
    assert len(doc["results"]) == 0 and len(doc["not_run"]) == 2 and rc == 3


@pytest.mark.parametrize(
    "args, words",
    [
        (["--reps", "1"], "allowed an integer >= 2"),
        (["--reps", "100001"], "at most 100000"),
        (["--load", "65"], "at most 64"),
        (["--load", "-1"], ">= 0"),
        (["--batch", "4097"], "at most 4096"),
        (["--batch", "0"], ">= 1"),
        (["--seqlen", "nan"], "not a number"),
        (["--heads", "1025"], "at most 1024"),
        (["--load-size", "16385"], "at most 16384"),
        (["--time-budget", "inf"], "allowed a finite number"),
        (["--timeout", "0"], "> 0"),
        (["--chunk-mib", "0"], ">= 1"),
        (["--head-dim", "17"], "does not declare it"),
        (["--dtype", "float64"], "invalid choice"),
        (["-k", "no-such-kernel"], "no-such-kernel"),
    ],
)
def test_stress_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    base = ["stress", "-k", "torch-blockwise", "--out", str(tmp_path / "out")]
    rc = main_rc(base + args if args[0] != "-k" else ["stress", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2, rc
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / "stress.json").exists()


def test_stress_problem_files_are_read_as_hostile_and_exclusive_with_shape_flags(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kernel": "torch-blockwise", "problem": {"batch": -3}}')
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"kernel": "x", "problem": P.to_dict()}))
    for args, words in (
        (["--problem", str(bad)], "reproducer"),
        (["--problem", str(tmp_path / "r.py")], ".json"),
        (["--problem", str(good), "--batch", "2"], "--batch"),
    ):
        rc = cli.main(["stress", "-k", "torch-blockwise", "--out", str(tmp_path / "out"), *args])
        err = capsys.readouterr().err
        assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
    rc = cli.main(
        [
            "stress",
            "-k",
            RacyClaims.spec,
            "--out",
            str(tmp_path / "out"),
            "--problem",
            str(good),
            "--reps",
            "40",
            "--load",
            "0",
            "--no-isolate",
            "-q",
        ]
    )
    doc = json.loads((tmp_path / "out" / "stress.json").read_text())
    assert rc == 1 and [r["short"] for r in doc["results"]] == [P.short()]


def test_a_reproducer_that_fails_only_after_others_is_stressed_alone_and_says_so(tmp_path, capsys):
    """A history-dependent reproducer (field ``before``, 021027b) fails only after those Problems ran in
    its process; stress runs its Problem alone, where it passes, and said nothing of it before."""
    one = tmp_path / "p.json"
    one.write_text(json.dumps({"problem": P.to_dict(), "before": [P.replace(seed=1).to_dict()]}))
    rc = cli.main(
        [
            "stress",
            "-k",
            "torch-blockwise",
            "--reps",
            "2",
            "--load",
            "0",
            "--no-isolate",
            "--problem",
            str(one),
            "--out",
            str(tmp_path / "out"),
            "-q",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0 and "fails only after 1 other Problem ran in the same process" in err, err
    assert "difftest repro" in err
