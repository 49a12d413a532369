"""`--shard I/N` and `difftest merge`: two shards run side by side (two processes at once)
never run the same problem, split the edge corpus between them without losing a corner,
and merge into one report whose coverage is that of the union of their cases; bad shard
sets are refused in one line with exit code 2."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from difftest.execute import adapter as registry
from difftest.judge.runner import CaseResult
from difftest.judge.triage import Kind
from difftest.model.problem import Problem
from difftest.report.merge import merge_campaigns, merge_findings, unexplained_after_merge
from difftest.search.campaign import _coverage
from difftest.search.result import CampaignResult
from difftest.search.shard import ShardError, in_shard, parse_shard, shard_of
from difftest.search.signature import RUN, Signature, message_shape
from difftest.vocab import CampaignStatus, Status

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = "torch-blockwise"


def _cmd(*args):
    return [sys.executable, "-m", "difftest", *args]


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")


def test_parse_shard():
    assert parse_shard("1/4") == (1, 4) and parse_shard(None) is None
    for bad in ("4/4", "-1/2", "1", "a/b", "1/0", "0/2/3"):
        with pytest.raises(ShardError, match="allowed I/N"):
            parse_shard(bad)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shards")
    procs = [
        subprocess.Popen(
            _cmd(
                "run",
                "-k",
                KERNEL,
                "-p",
                "quick",
                "--max-examples",
                "8",
                "--seed",
                "5",
                "--shard",
                f"{i}/2",
                "--out",
                str(tmp / f"s{i}"),
                "--db",
                "none",
                "-q",
                "--no-isolate",
            ),
            cwd=tmp,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]  # side by side
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-3000:]
    r = subprocess.run(
        _cmd("merge", str(tmp / "s0" / "report.json"), str(tmp / "s1" / "report.json"), "-o", str(tmp / "merged.json")),
        cwd=tmp,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    parts = [json.loads((tmp / f"s{i}" / "report.json").read_text()) for i in range(2)]
    return tmp, parts, json.loads((tmp / "merged.json").read_text())


@pytest.mark.slow
def test_two_shards_side_by_side_merge_into_one_campaign(shards):
    tmp, parts, merged = shards
    keys = [[json.dumps(c["problem"], sort_keys=True) for c in p["campaigns"][0]["cases"]] for p in parts]
    assert keys[0] and keys[1] and not set(keys[0]) & set(keys[1])  # no problem drawn twice
    for i, ks in enumerate(keys):  # each shard ran only its own problems
        assert all(shard_of(Problem.from_json(k), 2) == i for k in ks)
    (m,) = merged["campaigns"]
    assert m["kernel"] == KERNEL and m["status"] == "passed" and m["settings"]["shards"] == 2
    assert m["settings"]["duplicates_dropped"] == 0
    assert sorted(json.dumps(c["problem"], sort_keys=True) for c in m["cases"]) == sorted(keys[0] + keys[1])
    assert m["examples"] == len(keys[0]) + len(keys[1]) == sum(m["counts"].values())
    # the edge corpus is split, not lost: every corner of one unsharded campaign ran in exactly one shard
    from difftest import strategies

    kernel = registry.get(KERNEL)
    corpus = list(strategies.edge_problems(kernel.capability, "quick"))
    ran = {Problem.from_json(k) for k in keys[0] + keys[1]}
    assert corpus and all(p in ran for p in corpus)
    assert m["settings"]["edge_cases"] == len(corpus)
    # what each shard counted is summed, not the first shard's alone
    searched = [p["campaigns"][0]["settings"]["searched"] for p in parts]
    assert searched[1] > 0 and m["settings"]["searched"] == sum(searched)
    # the merged coverage is the coverage of the union, as one campaign would compute it
    from difftest.judge.runner import CaseResult
    from difftest.strategies.configurations import pair_coverage

    cases = [CaseResult.from_dict(c) for c in m["cases"]]
    cov = dict(m["coverage"])
    pairs = cov.pop("pairs")
    assert cov == _coverage(cases, kernel.capability, "quick")
    union = pair_coverage([c.problem for c in cases if c.status != "skipped"], kernel.capability, "quick")
    assert (pairs["covered"], pairs["missing"]) == (union["covered"], union["missing"])
    assert pairs["by_dimensions"] == union["by_dimensions"]
    assert m["outputs"]["dq"]["cases"] == m["examples"] - m["counts"]["skipped"]
    # and merging gives the gate a report it can compare with itself
    r = subprocess.run(
        _cmd("gate", "--baseline", str(tmp / "merged.json"), "--candidate", str(tmp / "merged.json")),
        cwd=tmp,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_merge_refuses_incomplete_or_mismatched_shards(shards, tmp_path):
    tmp, parts, _ = shards
    s0 = str(tmp / "s0" / "report.json")
    other = json.loads((tmp / "s1" / "report.json").read_text())
    other["campaigns"][0]["settings"]["seed"] = 6
    (tmp_path / "seed6.json").write_text(json.dumps(other))
    for args, why in (
        ([s0], "missing"),
        ([s0, s0], "given twice"),
        ([s0, str(tmp_path / "seed6.json")], "seed"),
        ([s0, str(tmp_path / "nope.json")], "no such file"),
    ):
        r = subprocess.run(
            _cmd("merge", *args, "-o", str(tmp_path / "m.json")),
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert not (tmp_path / "m.json").exists()


def test_in_shard_partitions_problems():
    ps = [
        Problem(
            batch=1, seqlen_q=s, seqlen_k=s + 1, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8, dtype="float32"
        )
        for s in range(1, 41)
    ]
    for n in (1, 2, 3):
        owners = [[i for i in range(n) if in_shard(p, (i, n))] for p in ps]
        assert all(len(o) == 1 for o in owners)
    assert len({shard_of(p, 3) for p in ps}) == 3


def test_merge_puts_kernels_side_by_side_and_refuses_one_kernel_twice():
    from difftest.report.merge import merge_reports
    from difftest.report.read import ReportError

    def doc(kernel, status="passed"):
        case = {
            "kernel": kernel,
            "problem": {"batch": 1, "seqlen_q": 3},
            "status": status,
            "verdicts": [{"output": "dq", "gate": "budget", "passed": status == "passed", "numbers": {"ratio": 0.5}}],
        }
        return {
            "difftest_report": 1,
            "campaigns": [
                {
                    "kernel": kernel,
                    "profile": "ci",
                    "status": status,
                    "cases": [case],
                    "coverage": {"hit": {"f": 1}, "missing": []},
                    "settings": {"seed": 0},
                }
            ],
        }

    m = merge_reports([("a.json", doc("k1")), ("b.json", doc("k2", "failed"))])
    assert [(c["kernel"], c["status"], c["examples"]) for c in m["campaigns"]] == [
        ("k1", "passed", 1),
        ("k2", "failed", 1),
    ]
    assert m["campaigns"][1]["outputs"]["dq"] == {"cases": 1, "passed": 0, "failed": 1, "worst_ratio": 0.5}
    with pytest.raises(ReportError, match="without --shard"):
        merge_reports([("a.json", doc("k1")), ("b.json", doc("k1"))])


def test_a_case_one_shard_left_unexplained_is_the_other_shards_finding():
    """Each shard hunts alone: a failing case whose shard ran out of budget before signing it
    (FA4's nightly shards left 25-172 such cases) is explained once merged when another
    shard's finding explains it; a case no shard's finding explains stays listed."""
    sig = Signature(str(Kind.CONTRACT_VIOLATION), (RUN,), "ValueError", (("head_dim_qk", (8, 16)),))

    def error(d):
        return CaseResult(
            kernel=KERNEL, problem=Problem(head_dim_qk=d, head_dim_v=d), status=Status.ERROR, error_type="ValueError"
        )

    def shard(i, cases, findings):
        return CampaignResult(
            kernel=KERNEL,
            profile="quick",
            status=CampaignStatus.FAILED,
            cases=cases,
            findings=findings,
            unexplained=len(cases) if not findings else 0,
            settings={"shard": f"{i}/2"},
        )

    recs = [shard(0, [error(16), error(40)], []), shard(1, [error(8)], [{"signature": sig.to_dict(), "status": "new"}])]
    recs[0].elapsed, recs[1].elapsed = 1800.0, 900.0
    # side by side on one GPU: the rate is over the longest shard's wall
    assert merge_campaigns(KERNEL, [("s0", recs[0]), ("s1", recs[1])])["rates"] == {
        "wall_s": 1800.0,
        "cases_per_hour": 6,
        "new_findings": 1,
        "new_findings_per_hour": 2.0,
    }
    got = unexplained_after_merge(merge_findings(recs), [c for r in recs for c in r.cases])
    assert got["unexplained"] == 1 and got["unexplained_cases"] == [
        f"case 2: {Problem(head_dim_qk=40, head_dim_v=40).short()} (ValueError)"
    ]
    # with the same message shape, the error met at head dim 40 widens that finding instead
    shaped = dataclasses.replace(sig, message=message_shape("bad tile 40"))
    for c in recs[0].cases + recs[1].cases:
        c.reason = f"ValueError: bad tile {c.problem.head_dim_qk}"
    recs[1].findings = [{"signature": shaped.to_dict()}]
    findings = merge_findings(recs)
    got = unexplained_after_merge(findings, [c for r in recs for c in r.cases])
    assert got["unexplained"] == 0 and findings[0]["absorbed"] == 1
    assert findings[0]["signature"]["needs"] == {"head_dim_qk": [16, 40, 8]}


def test_a_kernel_error_widens_the_finding_it_misses_least_of():
    """Two findings of one message (an illegal address under GQA, and one with unequal head dims
    on long keys): a case with unequal head dims on short keys widens the second (one need
    missed: a bound lowered), not the first (a switch dropped would claim every illegal address)."""
    msg = message_shape("illegal address 7")
    gqa = Signature(str(Kind.CONTRACT_VIOLATION), (RUN,), "ValueError", (("gqa", True),), 1, msg)
    dims = Signature(
        str(Kind.CONTRACT_VIOLATION), (RUN,), "ValueError", (("dims_differ", True), ("seqlen_k>=", 64)), 1, msg
    )
    p = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=32, head_dim_v=16)
    case = CaseResult(kernel=KERNEL, problem=p, status=Status.ERROR, error_type="ValueError")
    case.reason = "ValueError: illegal address 9"
    findings = [{"signature": gqa.to_dict()}, {"signature": dims.to_dict()}]
    got = unexplained_after_merge(findings, [case])
    assert got["unexplained"] == 0 and "absorbed" not in findings[0]
    assert findings[0]["signature"]["needs"] == {"gqa": True}
    assert findings[1]["signature"]["needs"] == {"dims_differ": True, "seqlen_k>=": 8}


def test_a_rule_widened_by_a_merge_takes_in_the_finding_it_now_explains():
    """cuDNN 9.19 on the H100 (2026-12-07): shard 0 kept dQ and dK/dV of one head-dim family as
    two findings (no gate in common); shard 1's dQ finding also held dV. Merged, the dQ finding
    took that one in and must then take in the dK/dV one too, whatever order the shards come in.
    Before: three findings in, two out."""
    kind = str(Kind.WRONG_RESULT)
    dq = Signature(kind, ("dq:budget", "dq:determinism"), "", ())
    dkdv = Signature(kind, ("dk:budget", "dv:budget"), "", ())
    dq_dv = Signature(kind, ("dq:budget", "dv:budget"), "", ())

    def shard(i, sigs):
        return CampaignResult(
            kernel=KERNEL,
            profile="nightly",
            status=CampaignStatus.FAILED,
            cases=[],
            findings=[{"signature": s.to_dict(), "status": "new", "hits": 2} for s in sigs],
            settings={"shard": f"{i}/2"},
        )

    for order in ([dq, dkdv], [dkdv, dq]):
        got = merge_findings([shard(0, order), shard(1, [dq_dv])])
        assert len(got) == 1 and got[0]["hits"] == 6
        assert set(got[0]["signature"]["gates"]) == {"dq:budget", "dq:determinism", "dk:budget", "dv:budget"}
        assert sorted(got[0]["shards"]) == ["0/2", "0/2", "1/2"]
        # every shard's own rule is kept beside the merged one, once
        assert sorted(v["id"] for v in got[0]["variants"]) == sorted({dq.id, dkdv.id, dq_dv.id})
    # findings of separate outputs that nothing joins stay apart
    assert len(merge_findings([shard(0, [dq, dkdv])])) == 2
