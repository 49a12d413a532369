"""Hunting: a campaign that goes on after a failure reports each distinct bug once, with a
signature (difftest/search/signature.py), its shrunk reproducer, how many cases hit it and
when it was first seen. Kernels here carry several independent faults at once, as real
kernels do; a campaign that stops at its first failure reports one of them."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from html import escape as html_escape
from pathlib import Path

import pytest
from hypothesis import strategies as st

from difftest import Problem
from difftest.judge.runner import RunConfig
from difftest.report.ci_gate import compare
from difftest.report.html import render_html
from difftest.report.junit import junit_xml
from difftest.report.write import campaign_record, findings_table, markdown_summary, write_findings, write_json
from difftest.search.campaign import Campaign
from difftest.search.findings import failure_message
from difftest.search.signature import MAX_VARIATIONS, RUN, Signature, SignatureError, absorbed, known_for, load_known
from tests.kernels_for_tests import SMALL, RefKernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@st.composite
def small(draw):
    """Small Problems where every fault below is reachable: causal, sinks, GQA, both dims."""
    hkv = draw(st.integers(1, 2))
    d = draw(st.sampled_from([8, 16]))
    return Problem(
        batch=draw(st.integers(1, 2)),
        seqlen_q=draw(st.integers(1, 24)),
        seqlen_k=draw(st.integers(1, 40)),
        heads_q=hkv * draw(st.integers(1, 2)),
        heads_kv=hkv,
        head_dim_qk=d,
        head_dim_v=d,
        causal=draw(st.booleans()),
        sinks=draw(st.booleans()),
        seed=draw(st.integers(0, 99)),
    ).validate()


class ThreeBugs(RefKernel):
    """Three independent faults on three outputs: dK 5% off under a causal mask, dV 5% off
    for a GQA group > 1, dQ 5% off with attention sinks."""

    name = "test-three-bugs"
    spec = "tests.test_hunt:ThreeBugs"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.causal:
            out.dk = out.dk * 1.05
        if p.group > 1:
            out.dv = out.dv * 1.05
        if p.sinks:
            out.dq = out.dq * 1.05
        return out


class OneBug(RefKernel):
    """One fault, hit by most Problems: dK 5% off once seqlen_k > 4."""

    name = "test-one-bug"
    spec = "tests.test_hunt:OneBug"

    def corrupt(self, inputs, out):
        if inputs.problem.max_seqlen_k > 4:
            out.dk = out.dk * 1.05
        return out


class TwoTriggersOneOutput(RefKernel):
    """Two faults on the same output, different triggers: dK 5% off under a causal mask,
    and dK 5% off with sinks."""

    name = "test-two-triggers"
    spec = "tests.test_hunt:TwoTriggersOneOutput"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.causal:
            out.dk = out.dk * 1.05
        if p.sinks:
            out.dk = out.dk * 1.05
        return out


def _hunt(kernel, tmp_path, **kw):
    kw.setdefault("max_examples", 60)
    kw.setdefault("database", None)
    return Campaign.of(
        kernel,
        "ci",
        strategy=small(),
        edge_cases=False,
        out_dir=tmp_path,
        config=RunConfig(isolate=False),
        hunt=kw.pop("hunt", True),
        **kw,
    ).run()


def _needs(f) -> dict:
    return dict(f.signature.needs)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    out = tmp_path_factory.mktemp("three")
    return _hunt(ThreeBugs(), out), out


def test_three_independent_bugs_give_three_findings(three):
    r, _ = three
    assert r.status == "failed" and r.hunt
    assert len(r.findings) == 3, [f.signature.describe() for f in r.findings]
    by_output = {f.signature.gates[0].split(":")[0]: f for f in r.findings}
    assert set(by_output) == {"dk", "dv", "dq"}
    # each signature names the feature its bug needs, and only that switch
    assert _needs(by_output["dk"]).get("causal") is True and "gqa" not in _needs(by_output["dk"])
    assert _needs(by_output["dv"]).get("gqa") is True and "causal" not in _needs(by_output["dv"])
    assert _needs(by_output["dq"]).get("sinks") is True and "gqa" not in _needs(by_output["dq"])
    for f in r.findings:
        assert f.hits >= 1 and f.first_seen["case"] >= 1 and not f.known
        assert f.best.problem.size() <= f.first.problem.size()
        rec = json.loads(open(f.reproducer["json"]).read())
        assert Problem.from_dict(rec["problem"]) == f.best.problem
    assert len({f.reproducer["json"] for f in r.findings}) == 3
    # the whole hunt stays bounded: the drawn examples, plus per finding its shrink runs and variations
    assert r.settings["searched"] <= 60
    assert len(r.cases) - r.settings["searched"] <= r.settings["hunt_attempts"] * (200 + MAX_VARIATIONS)


def test_first_failure_mode_stops_at_one(tmp_path):
    """The same kernel with first-failure semantics (ci's default): one finding."""
    r = _hunt(ThreeBugs(), tmp_path, hunt=None)
    assert not r.hunt and len([f for f in r.findings if not f.known]) == 1


def test_one_bug_hit_by_thirty_cases_is_one_finding(tmp_path):
    # steering off: every drawn Problem runs, so the one bug is hit again and again
    r = _hunt(OneBug(), tmp_path, steer_every=0)
    assert len(r.findings) == 1, [f.signature.describe() for f in r.findings]
    f = r.findings[0]
    assert f.search_hits >= 30 and f.hits >= f.search_hits
    assert dict(f.signature.needs).get("seqlen_k>=") == 5
    assert r.explained_skipped == 0 and r.unexplained == 0


def test_steering_skips_what_a_finding_explains_and_counts_it(tmp_path):
    r = _hunt(OneBug(), tmp_path)
    assert len(r.findings) == 1
    f = r.findings[0]
    assert r.explained_skipped > 0 and f.skipped == r.explained_skipped
    assert f.search_hits >= 1


def test_two_triggers_on_one_output_are_two_findings(tmp_path):
    r = _hunt(TwoTriggersOneOutput(), tmp_path)
    assert len(r.findings) == 2, [f.signature.describe() for f in r.findings]
    assert all(f.signature.gates == ("dk:budget",) for f in r.findings) or all(
        "dk:budget" in f.signature.gates for f in r.findings
    )
    needs = sorted(tuple(sorted(k for k, v in f.signature.needs if v is True)) for f in r.findings)
    assert needs == [("causal",), ("sinks",)]


def test_findings_in_every_output(three, tmp_path):
    r, out = three
    ids = [f.id for f in r.findings]
    rec = campaign_record(r)
    assert [f["id"] for f in rec["findings"]] == ids and rec["hunt"] is True
    # what the hunt bought for its wall time: cases and new findings per hour
    hours = r.elapsed / 3600
    assert rec["rates"]["new_findings"] == 3 and rec["rates"]["cases_per_hour"] == round(len(r.cases) / hours)
    assert rec["rates"]["new_findings_per_hour"] == round(3 / hours, 1)
    for f in rec["findings"]:
        assert f["hits"] >= 1 and f["first_seen"]["case"] >= 1 and f["reproducer"]["json"]
        assert f["signature"]["describe"] and Signature.from_dict(f["signature"]).id == f["id"]
    table = findings_table([r])
    md = markdown_summary([r])
    for fid in ids:
        assert table.count(fid) == 1 and md.count(fid) == 1
    report = write_json([r], tmp_path / "report.json")
    doc = json.loads(report.read_text())
    html = render_html(doc)
    for f in r.findings:
        assert f'data-k="{r.kernel}/finding/{f.id}/cases">{f.hits}<' in html
        assert html_escape(f.signature.describe()) in html
    # the pytest fixture's message names every finding, its signature, cases and reproducer
    msg = failure_message(r)
    assert "3 distinct findings" in msg
    for f in r.findings:
        assert f.signature.describe() in msg and f.reproducer["py"] in msg
    # JUnit: one testcase per finding, new against a baseline that has none of them
    clean = json.loads(report.read_text())
    c = clean["campaigns"][0]
    c.update(status="passed", findings=[], failure=None)
    c["cases"] = [x for x in c["cases"] if x["status"] == "passed"]
    res = compare(clean, doc)
    xml = junit_xml(res)
    for fid in ids:
        assert xml.count(f'name="finding {fid}"') == 1
    assert not res.passed


def test_first_failure_mode_still_signs_its_one_finding(tmp_path):
    r = _hunt(ThreeBugs(), tmp_path, hunt=False)
    assert len(r.findings) == 1 and r.findings[0].best is r.failure
    assert r.findings[0].reproducer == r.reproducer and r.findings[0].signature.tried > 0


class DkCausal(RefKernel):
    """The baseline of the gate test: only the causal dK fault (same name as the candidate)."""

    name = TwoTriggersOneOutput.name
    spec = "tests.test_hunt:DkCausal"

    def corrupt(self, inputs, out):
        if inputs.problem.causal:
            out.dk = out.dk * 1.05
        return out


def test_known_findings_replay_first_are_listed_and_the_hunt_goes_on(three, tmp_path):
    r, _ = three
    report = write_json([r], tmp_path / "report.json")
    entries = load_known(report)
    assert len(entries) == 3 and all(e.signature is not None and len(e.problems) == 1 for e in entries)
    assert known_for(entries, ThreeBugs()) == entries and known_for(entries, OneBug()) == []
    dq = next(e for e in entries if e.signature.gates == ("dq:budget",))
    two = [e for e in entries if e is not dq]
    r2 = _hunt(ThreeBugs(), tmp_path / "again", known=two)
    # replayed first: the run's first cases are the known findings' Problems
    assert [c.problem for c in r2.cases[:2]] == [e.problems[0] for e in two]
    known = [f for f in r2.findings if f.known]
    new = [f for f in r2.findings if not f.known]
    assert {f.id for f in known} == {e.signature.id for e in two}
    assert all(f.hits >= 1 and f.reproducer is None and not f.shrink for f in known)  # listed, never re-shrunk
    assert len(new) == 1 and new[0].signature.gates == ("dq:budget",) and r2.status == "failed"
    assert r2.failure is new[0].best
    # everything known: the hunt finds nothing new and the campaign passes, listing all three
    r3 = _hunt(ThreeBugs(), tmp_path / "all", known=entries)
    assert r3.status == "passed" and len(r3.findings) == 3 and all(f.known and f.hits for f in r3.findings)
    # a findings.json names them the same way
    fj = write_findings([r], tmp_path / "findings.json")
    assert [e.signature.id for e in load_known(fj)] == [e.signature.id for e in entries]


@pytest.mark.slow
def test_known_from_the_failure_store_are_replayed_and_not_shrunk(tmp_path):
    db = tmp_path / "db"
    r = _hunt(ThreeBugs(), tmp_path / "one", database=str(db), max_examples=30)
    assert len(r.findings) == 3
    entries = load_known(db)
    assert entries and all(e.signature is None for e in entries)
    r2 = _hunt(ThreeBugs(), tmp_path / "two", database=None, max_examples=30, known=known_for(entries, ThreeBugs()))
    known = [f for f in r2.findings if f.known]
    assert len(known) == 3 and all(not f.shrink and f.reproducer is None for f in known)
    assert {f.signature.gates for f in known} == {f.signature.gates for f in r.findings}
    assert r2.status == "passed"


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a difftest report or findings file"),
        ('{"difftest_report": 1, "campaigns": [7]}', "campaigns[0]"),
        (
            '{"difftest_findings": 1, "campaigns": [{"kernel": "k", "findings": [{"signature": {"kind": "fine"}}]}]}',
            "kind",
        ),
        (
            '{"difftest_findings": 1, "campaigns": [{"kernel": "k", "findings": [{"signature": '
            '{"kind": "wrong result", '
            '"gates": ["dk:budget"], "needs": {"rm -rf": true}}}]}]}',
            "needs",
        ),
        (
            '{"difftest_findings": 1, "campaigns": [{"kernel": "k", "findings": [{"signature": '
            '{"kind": "wrong result", '
            '"gates": ["dk:budget"], "needs": {"seqlen_k>=": "many"}}}]}]}',
            "seqlen_k>=",
        ),
        (
            '{"difftest_findings": 1, "campaigns": [{"kernel": "k", "findings": [{"signature": '
            '{"kind": "wrong result", '
            '"gates": ["dk:budget"], "needs": {"seqlen_q%": 1}}}]}]}',
            "seqlen_q%",
        ),
        (
            '{"difftest_findings": 1, "campaigns": [{"kernel": "k", "findings": [{"signature": '
            '{"kind": "wrong result", '
            '"gates": ["dk:budget"]}, "failure": {"problem": {"batch": -1}}}]}]}',
            "not a Problem",
        ),
    ],
)
def test_a_malformed_known_file_is_refused_in_one_line(tmp_path, text, why):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(SignatureError) as e:
        load_known(bad)
    assert why in str(e.value) and "\n" not in str(e.value) and str(bad) in str(e.value)


def test_known_files_of_every_other_shape_are_refused_by_the_cli(tmp_path):
    (tmp_path / "store.jsonl").write_text('{"batch": 1}\nnot a problem\n')
    (tmp_path / "empty").mkdir()
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    for src in ("missing.json", "store.jsonl", "empty", "bin.json"):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "difftest",
                "run",
                "-k",
                "tests.test_hunt:ThreeBugs",
                "--known",
                src,
                "--out",
                "o",
                "--db",
                "none",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, PYTHONPATH=ROOT),
        )
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--known" in r.stderr, (src, r.stderr)
        assert not (tmp_path / "o").exists()  # refused before anything ran


@pytest.mark.slow
def test_the_gate_tells_a_new_bug_on_an_already_failing_output_from_the_known_one(tmp_path):
    a = json.loads(write_json([_hunt(DkCausal(), tmp_path / "a")], tmp_path / "a.json").read_text())
    b = json.loads(write_json([_hunt(TwoTriggersOneOutput(), tmp_path / "b")], tmp_path / "b.json").read_text())
    assert len(a["campaigns"][0]["findings"]) == 1 and len(b["campaigns"][0]["findings"]) == 2
    # dk:budget fails in both; the candidate's sinks finding is not the baseline's bug
    res = compare(a, b)
    assert not res.passed
    assert any(f.kind == "regression" and "another bug" in f.message and f.output == "dk" for f in res.findings)
    xml = junit_xml(res)
    new = next(f for f in b["campaigns"][0]["findings"] if "sinks" in f["signature"]["needs"])
    old = next(f for f in b["campaigns"][0]["findings"] if "causal" in f["signature"]["needs"])
    assert xml.count(f'name="finding {new["id"]}"') == 1 and xml.count(f'name="finding {old["id"]}"') == 1
    by_name = {k[1]: v for k, v in res.testcases.items()}
    assert [f.kind for f in by_name[f"finding {new['id']}"]] == ["regression"]
    assert [f.kind for f in by_name[f"finding {old['id']}"]] == ["known"]
    # the baseline's one bug against itself: known, the gate passes
    assert compare(a, a).passed and compare(b, b).passed


def test_failures_left_unsigned_still_fail_the_campaign(tmp_path):
    """No finding may be kept (the cap, or a budget spent): the failing cases are counted,
    the campaign fails, and the first of them is its unshrunk reproducer."""
    r = _hunt(OneBug(), tmp_path, max_findings=0, max_examples=20)
    assert r.findings == [] and r.unexplained >= 1 and r.status == "failed"
    assert r.failure is r.first_failure and r.failure.failed and "no finding explains" in r.reason
    assert json.loads(open(r.reproducer["json"]).read())["failed_gates"] == ["dk:budget"]


class RaisesOnSinksWrongDkCausal(RefKernel):
    """A kernel error and a wrong result at once: raises ValueError with sinks, dK 5% off
    under a causal mask."""

    name = "test-raise-and-wrong"
    spec = "tests.test_hunt:RaisesOnSinksWrongDkCausal"

    def corrupt(self, inputs, out):
        if inputs.problem.sinks:
            raise ValueError("sinks unsupported on this path")
        if inputs.problem.causal:
            out.dk = out.dk * 1.05
        return out


def test_a_kernel_error_and_a_wrong_result_are_two_findings(tmp_path):
    r = _hunt(RaisesOnSinksWrongDkCausal(), tmp_path, max_examples=40)
    kinds = sorted((f.signature.kind, f.signature.error_type) for f in r.findings)
    assert kinds == [("contract violation", "ValueError"), ("wrong result", "")], [
        f.signature.describe() for f in r.findings
    ]
    err = next(f for f in r.findings if f.signature.error_type)
    assert dict(err.signature.needs).get("sinks") is True and err.signature.gates == ("all:run",)
    assert err.best.status == "error" and err.hits >= 1


def _sig(gates=("dk:budget",), kind="wrong result", **needs):
    return Signature(kind, tuple(gates), "", tuple(sorted((n.replace("_ge", ">="), v) for n, v in needs.items())))


def test_same_identity_compares_switches_and_shared_choices_not_bounds():
    from difftest.search.signature import same_identity

    causal = _sig(causal=True, seqlen_k_ge=2)
    assert same_identity(causal, _sig(causal=True, sinks=True))  # nested switches: one fault, seen with sinks too
    assert same_identity(_sig(causal=True, sinks=True), causal)
    assert not same_identity(causal, _sig(sinks=True))  # two triggers on one output: two bugs
    assert not same_identity(causal, _sig(gates=("dq:budget",), causal=True))  # another output
    assert not same_identity(causal, _sig(kind="nondeterminism", causal=True))
    dim8 = _sig(head_dim_qk=(8, 16))
    assert same_identity(dim8, _sig(head_dim_qk=(16, 24)))
    assert same_identity(_sig(sinks=True, values=("mixed_do",)), _sig(sinks=True, dtype=("float32",)))
    # a racing output fails its budget in one record, its determinism in the other: one bug (two
    # findings on fb2059e, cuDNN's dQ at d_qk > 128 on the H100); another output's race is not it
    dq_race = _sig(gates=("dq:determinism",), dims_differ=True)
    assert same_identity(_sig(gates=("dq:budget",), dims_differ=True), dq_race)
    assert same_identity(dq_race, _sig(gates=("dq:budget", "dq:nonfinite"), dims_differ=True, gqa=True))
    assert not same_identity(_sig(gates=("dk:budget",), dims_differ=True), dq_race)
    assert not same_identity(
        _sig(gates=("dq:budget",), dims_differ=True), _sig(gates=("dq:nonfinite",), dims_differ=True)
    )
    # a signature survives its record
    s = _sig(causal=True, seqlen_k_ge=33, head_dim_qk=(8, 16))
    assert Signature.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_one_finding_per_root_cause_merges_what_fails_the_same_way():
    """FA4 4.0.0b36 on the H100 (2026-12-06): one MLIRError on unequal head dims came back as three
    findings (head dims {24,32}, {56,64}, {88,96}). Failures of one kind, exception and message
    shape and outputs, triggered by the same switches, are one bug whose needs are the smallest
    rule covering them; another message shape, or a trigger that is neither nested nor
    compatible, is another bug. Fails on 30f8f82 (disjoint head dims were two bugs)."""
    from difftest.search.signature import merged, message_shape, same_identity

    def err(message, **needs):
        return Signature(
            "contract violation",
            ("all:run",),
            "MLIRError",
            tuple(sorted((n, v) for n, v in needs.items())),
            message=message_shape(message),
        )

    shape = "MLIRError: failed to legalize 'cute.copy' at head_dim 24 (tile 0x7f3a) in /tmp/x/kernel.py"
    a = err(shape, dims_differ=True, head_dim_qk=(24, 32))
    b = err(shape.replace("24", "56").replace("0x7f3a", "0x11"), dims_differ=True, head_dim_qk=(56, 64))
    assert a.message == b.message and "24" not in a.message and "/tmp" not in a.message
    assert same_identity(a, b)
    m = merged(a, b)
    assert dict(m.needs) == {"dims_differ": True, "head_dim_qk": (24, 32, 56, 64)}
    assert m.describe().startswith("contract violation on MLIRError (failed to legalize")
    other = err("MLIRError: partition of a layout failed", dims_differ=True, head_dim_qk=(56, 64))
    assert not same_identity(a, other)  # another message: another bug
    assert same_identity(a, Signature(a.kind, a.gates, a.error_type, a.needs))  # a record without a message
    # the smallest rule: switches both need, bounds at the lower, a choice one side lacks is dropped
    wide = merged(_sig(causal=True, seqlen_k_ge=5, dtype=("float32",)), _sig(causal=True, sinks=True, seqlen_k_ge=2))
    assert dict(wide.needs) == {"causal": True, "seqlen_k>=": 2}
    # nested switches, a choice one side constrains: a 5% dQ error with sinks hid in float16 on the
    # first, tiny shrunk Problem (needs float32), not on a larger one with unequal dims
    small = _sig(gates=("dq:budget",), sinks=True, dtype=("float32",))
    large = _sig(gates=("dq:budget",), sinks=True, dims_differ=True)
    assert same_identity(small, large, Problem(dtype="float16", head_dim_v=16), Problem(sinks=True))
    assert dict(merged(small, large).needs) == {"sinks": True}


class PartialRowsBug(RefKernel):
    """dQ 5% off in every query row past the last multiple of 16 (cuDNN's FP8 backward on the H200,
    results/bugs/cudnn/REPORT-fp8-dq-partial-rows.md, where dQ is 0 there)."""

    name = "test-partial-rows"
    spec = "tests.test_hunt:PartialRowsBug"

    def corrupt(self, inputs, out):
        p = inputs.problem
        for q0, q1 in zip(p.cu_seqlens_q[:-1], p.cu_seqlens_q[1:]):
            tail = q0 + (q1 - q0) // 16 * 16
            out.dq[tail:q1] *= 1.05
        return out


@pytest.mark.slow
def test_a_tail_block_bug_is_signed_by_its_block_and_whole_blocks_are_still_searched(tmp_path):
    """Without the tail need this finding signs "nothing found" or a bound, and explains (so the hunt
    skips) every Problem, whole blocks included: cuDNN's FP8 dQ signed "seqlen_k >= 2" and 1,839
    drawn problems were skipped on the H200 (results/fp8.md)."""
    r = _hunt(PartialRowsBug(), tmp_path)
    (f,) = r.findings
    assert _needs(f).get("seqlen_q%") == 16, f.signature.describe()
    assert "seqlen_q not a multiple of 16" in f.signature.describe()
    assert f.explains_problem(Problem(seqlen_q=33, seqlen_k=5, head_dim_qk=8, head_dim_v=8))
    assert f.explains_problem(Problem(batch=2, seqlen_q=(16, 3), seqlen_k=(5, 5), head_dim_qk=8, head_dim_v=8))
    assert not f.explains_problem(Problem(seqlen_q=32, seqlen_k=5, head_dim_qk=8, head_dim_v=8))
    assert Signature.from_dict(json.loads(json.dumps(f.signature.to_dict()))) == f.signature
    # a fault with no tail in it gets no tail need: rounding the lengths up leaves it failing
    (g,) = _hunt(OneBug(), tmp_path / "one").findings
    assert not {"seqlen_q%", "seqlen_k%"} & set(_needs(g)), g.signature.describe()


class WrongLseForGqa(RefKernel):
    """One bug with three faces (cuDNN's THD GQA Stats, H200 2026-12-02): the LSE of every
    head but a group's first is -inf, and the gradients computed from it are NaN (one
    sequence) or finite and wrong (two)."""

    name = "test-wrong-lse-gqa"
    spec = "tests.test_hunt:WrongLseForGqa"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.group > 1:
            heads = [h for h in range(p.heads_q) if h % p.group]
            out.lse[:, heads] = float("-inf")
            if p.batch == 1:
                out.dq[:, heads] = float("nan")
            else:
                out.dq[:, heads] *= 2
                out.dk = out.dk * 2
        return out


def test_a_wrong_lse_and_the_gradients_it_breaks_are_one_finding(tmp_path):
    """Fails on 7d34fd5 (three findings: lse:nonfinite, dq:nonfinite, dk/dq:budget)."""
    r = _hunt(WrongLseForGqa(), tmp_path, steer_every=0)
    assert len(r.findings) == 1, [f.signature.describe() for f in r.findings]
    sig = r.findings[0].signature
    assert sig.gates == ("lse:nonfinite",) and _needs(r.findings[0]).get("gqa") is True
    assert r.unexplained == 0


class Racy(RefKernel):
    """Claims determinism; ``race`` corrupts every ``every``-th call where ``hit`` holds."""

    capability = dataclasses.replace(SMALL, deterministic=True)
    every = 1

    def __init__(self):
        self.calls = 0

    def corrupt(self, inputs, out):
        self.calls += 1
        if self.hit(inputs.problem) and self.calls % self.every == 0:
            self.race(out)
        return out


class RacyDsink(Racy):
    """A race on dSink alone (cuDNN's dSink, H200): every fifth call adds an ulp-sized
    error to dSink, whatever the Problem."""

    name = "test-racy-dsink"
    spec = "tests.test_hunt:RacyDsink"
    every = 5

    def hit(self, p):
        return p.sinks

    def race(self, out):
        out.dsink = out.dsink + 1e-6 * out.dsink.abs().clamp_min(1e-3)


def test_a_race_is_one_finding_needing_only_what_its_output_needs(tmp_path):
    """A pass of a racy Problem proves nothing: the race's signature needs sinks (no dSink
    without them) and nothing a lucky pass suggested. On 7d34fd5 the same race gave several
    findings with head dims, dtypes and switches as needs (cuDNN: three)."""
    r = _hunt(RacyDsink(), tmp_path, steer_every=0, max_examples=80)
    assert len(r.findings) == 1, [f.signature.describe() for f in r.findings]
    f = r.findings[0]
    assert f.signature.kind == "nondeterminism" and f.signature.gates == ("dsink:determinism",)
    assert dict(f.signature.needs) == {"sinks": True}, f.signature.describe()


class RacyWrongDq(Racy):
    """cuDNN's dense dQ at head dims 136..160 (H200, 2026-12-02): some calls leave dQ's last
    columns at zero, others not, for every Problem with two or more sequences. Wrong AND
    racing: a variation that happens to pass proves nothing."""

    name = "test-racy-wrong-dq"
    spec = "tests.test_hunt:RacyWrongDq"
    every = 3

    def hit(self, p):
        return p.batch >= 2

    def race(self, out):
        out.dq[..., -4:] = 0


@pytest.mark.slow
def test_a_wrong_result_that_races_is_one_finding(tmp_path):
    """On 04c08c0 the steady-looking dq:budget made every lucky pass a need (head dims, sinks,
    causal...): several findings for one bug."""
    r = _hunt(RacyWrongDq(), tmp_path, steer_every=0, max_examples=80)
    assert len(r.findings) == 1, [f.signature.describe() for f in r.findings]
    needs = _needs(r.findings[0])
    assert set(needs) <= {"batch>=", "varlen"}, r.findings[0].signature.describe()


class SteadyRacyDq(Racy):
    """cuDNN 9.19 at d_qk > 128 with a smaller d_v (H100, 2026-12-06): dQ wrong on every call
    and different on every call (an out-of-bounds write), so the case fails dq:budget AND
    dq:determinism, both gates of a racing output. Here: under a causal mask."""

    name = "test-steady-racy-dq"
    spec = "tests.test_hunt:SteadyRacyDq"

    def hit(self, p):
        return p.causal

    def race(self, out):
        out.dq[..., -4:] = float(self.calls)  # another wrong value each call


def test_a_wrong_result_racing_on_every_call_still_finds_its_needs(tmp_path):
    """A racing output's pass is confirmed by fresh runs where the shrunk failure is steady. On
    fb2059e: needs nothing found ("fails on every variation"), so it explained no Problem and the
    hunt kept meeting it (cuDNN: five such findings of one bug in one nightly)."""
    r = _hunt(SteadyRacyDq(), tmp_path, steer_every=0, max_examples=80)
    assert len(r.findings) == 1, [f.signature.describe() for f in r.findings]
    sig = r.findings[0].signature
    assert set(sig.gates) == {"dq:budget", "dq:determinism"}, sig.describe()
    assert _needs(r.findings[0]) == {"causal": True}, sig.describe()


class FlakyRacyDq(SteadyRacyDq):
    """The same, as cuDNN really did it: the corrupted dQ shows on three calls of four (one
    configuration failed 3 of 4 and 4 of 6 times in that nightly)."""

    name = "test-flaky-racy-dq"
    spec = "tests.test_hunt:FlakyRacyDq"

    def corrupt(self, inputs, out):
        self.calls += 1
        if self.hit(inputs.problem) and self.calls % 4:
            self.race(out)
        return out


def test_a_wrong_result_racing_on_most_calls_still_finds_its_needs(tmp_path):
    """On fb2059e: needs nothing found."""
    r = _hunt(FlakyRacyDq(), tmp_path, steer_every=0, max_examples=80)
    wrong = [f for f in r.findings if f.signature.kind == "wrong result"]
    assert wrong, [f.signature.describe() for f in r.findings]
    assert all(_needs(f) == {"causal": True} for f in wrong), [f.signature.describe() for f in wrong]


class _FakeClock:
    """The search's clock (time.perf_counter in the search modules), advanced by the kernel's
    calls alone: a budget test that holds however loaded the machine is."""

    def __init__(self):
        self.t = 1000.0

    def perf_counter(self):
        self.t += 1e-4  # every read moves it a little: a loop that only reads still ends
        return self.t

    def __getattr__(self, name):  # time.time, time.strftime, time.gmtime ... as they are
        return getattr(time, name)


CLOCK = _FakeClock()


class SlowWrongDk(RefKernel):
    """dK 5% off everywhere, and every call 0.6 s of the search's clock (a JIT kernel's compile
    per configuration, in miniature)."""

    name = "test-slow-wrong-dk"
    spec = "tests.test_hunt:SlowWrongDk"

    def corrupt(self, inputs, out):
        CLOCK.t += 0.6
        out.dk = out.dk * 1.05
        return out


def test_a_findings_signature_takes_a_share_of_the_budget_not_the_campaign(tmp_path, monkeypatch):
    """A finding's signature, like its shrink, takes at most FINDING_SHARE of the budget (at least
    FINISH_FLOOR_S): FA4 on the H100 spent ~200 of 240 s signing its first three findings, a
    compile for every variation. A problem with every feature on has ~20 variations (12 s of the
    fake clock here); on dda23aa they all ran."""
    from difftest.search import campaign, shrinking, state
    from difftest.search.hunt import FINDING_SHARE

    for module in (campaign, shrinking, state):
        monkeypatch.setattr(module, "time", CLOCK)
    rich = Problem(
        batch=2,
        seqlen_q=(5, 3),
        seqlen_k=(6, 4),
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=8,
        dtype="float16",
        causal=True,
        window_left=3,
        sinks=True,
        softmax_scale=0.5,
        pad_tail=2,
        values="scaled",
        value_scale=2.0,
    ).validate()
    r = Campaign.of(
        SlowWrongDk(),
        "ci",
        strategy=st.just(rich),
        time_budget=60,
        max_examples=1,
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        hunt=True,
        finding_calls=0,
        config=RunConfig(isolate=False),
    ).run()
    (f,) = [f for f in r.findings if not f.known]
    share = max(5.0, FINDING_SHARE * 60)
    assert f.shrink["seconds"] <= share + 0.6 + 0.1, f.shrink  # one variation may run past the share


# ---------------------------------------------------------------------------- compile-bound kernels
DIMS_40 = tuple(range(8, 97, 8))
COMPILED = dataclasses.replace(SMALL, head_dims_qk=DIMS_40, compile_key=("dtype", "head_dim_qk", "head_dim_v"))


class Smem40To72(RefKernel):
    """A JIT kernel (compile key: dtype and head dims) whose backward does not fit shared memory
    at head dims 40 to 72: FA4's head-dim-range build errors in miniature."""

    name = "test-smem-40-72"
    spec = "tests.test_hunt:Smem40To72"
    capability = COMPILED

    def corrupt(self, inputs, out):
        if 40 <= inputs.problem.head_dim_qk <= 72:
            raise MemoryError(f"backward needs {inputs.problem.head_dim_qk * 1024} bytes of shared memory")
        return out


def _hunted(kernel, problems, tmp_path):
    return Campaign.of(
        kernel,
        "ci",
        strategy=st.sampled_from(problems),
        max_examples=len(problems) * 4,
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        hunt=True,
        coverage=0,
        config=RunConfig(isolate=False),
    ).run()


def test_a_failure_of_a_findings_kind_at_another_head_dim_widens_it_with_one_run(tmp_path):
    """The same build error met at head dims the finding's signature did not name: the finding's
    own shrunk Problem, moved to the new head dim, fails alike, so its needs widen, one case and
    no shrink or variations (on the old code each sighting was hunted, shrunk and signed again,
    a compile a step on FA4, before merging). One finding, the head dims of every sighting."""
    base = Problem(batch=1, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=1, head_dim_qk=64, head_dim_v=64)
    problems = [base.replace(head_dim_qk=d, head_dim_v=d, seed=i) for i, d in enumerate((48, 72, 64, 40))]
    r = _hunted(Smem40To72(), problems, tmp_path)
    new = [f for f in r.findings if not f.known]
    assert len(new) == 1, [f.signature.describe() for f in new]
    needs = dict(new[0].signature.needs)
    assert set(needs["head_dim_qk"]) == {40, 48, 56, 64, 72}, needs  # the signature's three, two sightings'
    assert r.settings["hunt_attempts"] == 1, r.settings  # the later sightings were widened, not hunted
    assert r.settings["widened"] == 2
    assert r.unexplained == 0


def test_a_choice_widened_past_half_its_values_is_no_longer_a_need():
    """sdpa-flash's misaligned-address error (H100, 2026-12-06) was widened one head dim at a time
    to 17 of its 32: the list said nothing a reader or the hunt could use. On 3675cd4 it grew."""
    from difftest.search.signature import widening

    cap = dataclasses.replace(SMALL, head_dims_qk=tuple(range(8, 72, 8)))  # 8 head dims
    anchor = Problem(batch=1, seqlen_q=3, seqlen_k=5, heads_q=1, heads_kv=1, head_dim_qk=8, head_dim_v=8)
    sig = _sig(causal=True, head_dim_qk=(8, 16, 24))
    wider, q = widening(sig, anchor.replace(head_dim_qk=32, head_dim_v=32, causal=True), anchor, cap)
    needs = dict(wider.needs)
    assert needs["causal"] is True and set(needs["head_dim_qk"]) == {8, 16, 24, 32} and q.head_dim_qk == 32
    widest, _ = widening(wider, anchor.replace(head_dim_qk=40, head_dim_v=40, causal=True), anchor, cap)
    assert dict(widest.needs) == {"causal": True}, widest.describe()
    # a choice of few values keeps its need: two half-precision dtypes of three
    three = dataclasses.replace(cap, dtypes=("float32", "float16", "bfloat16"))
    half, _ = widening(
        _sig(causal=True, dtype=("float16",)), anchor.replace(dtype="bfloat16", causal=True), anchor, three
    )
    assert dict(half.needs) == {"causal": True, "dtype": ("bfloat16", "float16")}, half.describe()


class WrongDkAbove40(RefKernel):
    """A JIT kernel (compile key: dtype and head dims) whose dK is 5% off at head dims 40 and up."""

    name = "test-dk-above-40"
    spec = "tests.test_hunt:WrongDkAbove40"
    capability = COMPILED

    def corrupt(self, inputs, out):
        if inputs.problem.head_dim_qk >= 40:
            out.dk = out.dk * 1.05
        return out


def test_a_compile_bound_kernels_shrink_builds_few_new_configurations(tmp_path):
    """A shrink on a kernel with a compile key moves a compiled field (a head dim, the dtype) at
    most SHRINK_BUILDS times: the old shrink walked head dims 8, 16, 24, 32 ... up to the
    failing one, a compile each (FA4: 1-3 s), while lengths and heads shrink inside what is built."""
    from difftest.search.hunt import SHRINK_BUILDS

    start = Problem(batch=2, seqlen_q=9, seqlen_k=11, heads_q=4, heads_kv=2, head_dim_qk=64, head_dim_v=64)
    r = _hunted(WrongDkAbove40(), [start], tmp_path)
    (f,) = [f for f in r.findings if not f.known]
    events = [json.loads(x) for x in (tmp_path / "test-dk-above-40.cases.jsonl").read_text().splitlines()]
    keys, shrinking = set(), False
    for e in events:
        if e["event"] == "hunt":
            shrinking = True
        elif e["event"] == "case" and shrinking:
            p = e["problem"]
            keys.add((p["dtype"], p["head_dim_qk"], p["head_dim_v"]))
    # the shrink's and the signature's cases: the start's configuration, at most SHRINK_BUILDS
    # new ones while shrinking, and the signature's head-dim and dtype variations (at most 4)
    assert len(keys) <= 1 + SHRINK_BUILDS + 4, sorted(keys)
    assert f.best.problem.heads_q < start.heads_q or f.best.problem.batch < start.batch  # it still shrank


def test_a_kernel_error_met_outside_its_needs_widens_the_signature_without_a_run():
    """FA4 b25's misaligned-pointer error was signed 'seqlen_q not a multiple of 8' and then met
    at seqlen_q 128: the case disproves that need, so the finding absorbs it (tails and switches
    dropped, bounds lowered, choices joined); a wrong result never (a gate in common is no
    identity), nor a signature without a message shape."""
    msg = "Tensor data pointer is not aligned to # bytes."
    needs = (("layout", ("misaligned",)), ("seqlen_q%", 8), ("seqlen_q>=", 64), ("sinks", True))
    sig = Signature("contract violation", (RUN,), "RuntimeError", needs, 3, msg)
    p = Problem(seqlen_q=16, seqlen_k=1, head_dim_qk=16, head_dim_v=16, layout="misaligned")
    wider = absorbed(sig, p)
    assert wider.needs == (("layout", ("misaligned",)), ("seqlen_q>=", 16)) and wider.message == msg
    assert wider.explains_problem(p) and wider.error_type == "RuntimeError"
    bound = dataclasses.replace(sig, needs=needs[:1] + needs[2:3])
    assert absorbed(bound, p.replace(seqlen_q=1)).needs == (("layout", ("misaligned",)),)  # a bound of 1 is none
    held = Problem(seqlen_q=65, seqlen_k=1, head_dim_qk=16, head_dim_v=16, layout="misaligned", sinks=True)
    assert sig.explains_problem(held) and absorbed(sig, held) is None
    assert absorbed(dataclasses.replace(sig, message=""), p) is None
    assert absorbed(_sig(gates=("dq:budget",), sinks=True), p) is None
    dims = Signature("contract violation", (RUN,), "MLIRError", (("head_dim_qk", (8, 16)),), 2, "bad")
    assert absorbed(dims, p.replace(head_dim_qk=24, head_dim_v=24)).needs == (("head_dim_qk", (16, 24, 8)),)


def test_a_cuda_error_name_never_joins_or_absorbs_what_its_held_rule_did_not_try():
    """FA4 4.0.0b25's merged nightly (H100, 2026-12-07): shard 1 cut a ``cudaErrorInvalidValue``
    signature at dense head dims 88/176 after one variation, shard 3 one holding an empty query
    sequence under varlen after none; the merge called them one bug (no measured switch either
    side) and absorbed shard 0's empty-sequence cases into it by the error's name, widening its
    held head dims: the empty-sequence launch failure, a bug of its own, was gone. Many causes
    share one CUDA error name: a switch one side holds untried and the other lacks keeps them
    apart, and a name is no ground to absorb a case without a run. A message of its own (MLIRError's
    text) still joins and absorbs as before. Fails on 441ca28 (one bug, and the case absorbed)."""
    from difftest.search.signature import device_fault_only, one_bug

    name = "cudaErrorInvalidValue"
    dense = Signature(
        "contract violation",
        (RUN,),
        name,
        (("dtype", ("float16",)), ("head_dim_qk", (88,)), ("layout", ("do_transposed",))),
        1,
        name,
        False,
        ("dtype", "head_dim_qk", "layout"),
    )
    held = (("empty_q", True), ("varlen", True), ("dtype", ("float16",)), ("head_dim_qk", (88,)))
    empty = Signature(
        "contract violation", (RUN,), name, held, 0, name, False, ("dtype", "empty_q", "head_dim_qk", "varlen")
    )
    assert device_fault_only(dense) and device_fault_only(empty)
    assert not one_bug(dense, empty) and not one_bug(empty, dense)
    assert one_bug(dense, dataclasses.replace(dense, needs=dense.needs[:1] + (("head_dim_qk", (80,)),)))
    # a trigger both measured ties them, whatever else one holds (two empty-key launch failures needing varlen)
    tied = dataclasses.replace(dense, needs=dense.needs + (("varlen", True),))
    assert one_bug(tied, dataclasses.replace(empty, assumed=("dtype", "empty_q", "head_dim_qk")))
    seq = Problem(batch=1, seqlen_q=[1], seqlen_k=[0], head_dim_qk=80, head_dim_v=88, layout="do_transposed")
    assert not dense.explains_problem(seq) and absorbed(dense, seq) is None
    # a message of its own is an identity: the same records with MLIRError's text join and absorb
    mlir = [dataclasses.replace(s, error_type="MLIRError", message="unable to partition") for s in (dense, empty)]
    assert not device_fault_only(mlir[0]) and one_bug(*mlir)
    assert absorbed(mlir[0], seq) is not None


def test_a_variation_that_raises_another_error_measures_no_need():
    """FA4 4.0.0b25 raises a predicate build error at most head dims (2026-12-07, H100). A GQA build
    error at head dims 176-192 had its head-dim neighbours raise that other error, which the
    signature read as passes: one bug signed as `head_dim_qk in {176,184}` and `head_dim_qk=192`,
    kept apart as disjoint (the b25-like stand-in of results/coverage-phase.md, every seed). A
    variation that raises another error says nothing: the choice is held, the signature complete,
    and a held choice separates no two records of one failure. Fails on c4c284d (192 measured)."""
    from difftest.judge.runner import CaseResult
    from difftest.kernels.corner_faults import CornerFaults
    from difftest.search.signature import derive, one_bug
    from difftest.vocab import Status

    msg = "expects the M-mode to be divisible by atom_layout_dQ"

    def outcome(q):
        if q.head_dim_qk % 32 and q.head_dim_v % 32:
            return CaseResult("k", q, Status.ERROR, "PredError: 'cute.copy' op expects pred", error_type="PredError")
        if q.group > 1 and q.head_dim_qk in (176, 184, 192):
            return CaseResult("k", q, Status.ERROR, f"BuildError: {msg}", error_type="BuildError")
        return CaseResult("k", q, Status.PASSED, "")

    p = Problem(seqlen_q=1, seqlen_k=1, heads_q=2, heads_kv=1, head_dim_qk=192, head_dim_v=192, dtype="float16")
    sig = derive(outcome(p), outcome, CornerFaults.capability)
    needs = dict(sig.needs)
    assert needs["gqa"] is True and "gqa" not in sig.assumed  # group 1 ran and passed: measured
    assert needs["head_dim_qk"] == (192,) and "head_dim_qk" in sig.assumed and sig.complete, sig.describe()
    assert "another error hid their variations" in sig.describe()
    other = Signature(
        "contract violation",
        (RUN,),
        "BuildError",
        (("dims_differ", True), ("gqa", True), ("head_dim_qk", (176, 184))),
        4,
        msg,
    )
    assert one_bug(sig, dataclasses.replace(other, message=sig.message))
    measured = dataclasses.replace(sig, assumed=())  # the same sets, both measured: disjoint, two triggers
    assert not one_bug(measured, dataclasses.replace(other, message=sig.message))

    def wider(q):  # both neighbours fail alike, the far end raises the other error
        if q.group > 1 and 176 <= q.head_dim_qk <= 200:
            return CaseResult("k", q, Status.ERROR, f"BuildError: {msg}", error_type="BuildError")
        return outcome(q)

    sig = derive(wider(p), wider, CornerFaults.capability)
    assert "head_dim_qk" not in dict(sig.needs), sig.describe()  # a value judged failing alike: no need


def test_one_device_fault_is_one_failure_whichever_wrapper_raised_it():
    """FA4 4.0.0b25 on the H100 (2026-12-06, 15 shards): one illegal address came back as torch's
    ``AcceleratorError`` in some cases and CuTe DSL's ``CUDADialectError`` in others, and its
    head-dim 8/16 predicate error as four message shapes differing only in a layout's nesting:
    six findings of two faults. The CUDA error a message names is the failure, and a layout is
    ``(...)``; other CUDA errors and other messages stay apart; a signature recorded by the older
    rule still knows its failure. Fails on a37e204 (error types compared as raised)."""
    from difftest.judge.runner import CaseResult
    from difftest.search.result import same_failure
    from difftest.search.signature import derive, message_shape
    from difftest.vocab import Status

    torch_text = (
        "CUDA error: an illegal memory access was encountered\n"
        "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information."
    )
    cute_text = "error: cudaErrorIllegalAddress (error code: 700)\n = note: error code 700 = note: - Error name"
    p = Problem(head_dim_qk=8, head_dim_v=8)

    def case(error_type, reason, problem=p):
        return CaseResult("k", problem, Status.ERROR, f"{error_type}: {reason}", error_type=error_type)

    a, b = case("AcceleratorError", torch_text), case("CUDADialectError", cute_text)
    assert same_failure(a, b) and same_failure(b, a)
    sa = derive(a, lambda q: a, budget_calls=0)
    sb = derive(b, lambda q: b, budget_calls=0)
    assert sa.error_type == sb.error_type == "cudaErrorIllegalAddress" and sa.id == sb.id
    assert sa.fails_alike(b) and sb.fails_alike(a)
    assert sa.describe().startswith("contract violation on cudaErrorIllegalAddress; needs")
    misaligned = case("AcceleratorError", "CUDA error: misaligned address\nSearch for `cudaErrorMisalignedAddress'")
    assert not same_failure(a, misaligned) and not sa.fails_alike(misaligned)
    # a layout's nesting is not the error's shape; the words around it are
    pred = (
        "DSLRuntimeError: \nerror: IR verification failed: 'cute.copy' op expects pred to have compatible shape with: "
    )
    shapes = {message_shape(pred + s) for s in ("(8,(2))", "((4,2),(1,2))", "(16)")}
    assert len(shapes) == 1 and "(...)" in shapes.pop()
    assert message_shape(pred + "(8,(2))") != message_shape("DSLRuntimeError: \nfailed to partition (8,(2))")
    # a signature of the older rule (exception type as raised, the message's text shape)
    old_text = "CUDA error: an illegal memory access was encountered Search for `cudaErrorIllegalAddress' in https:/"
    old = Signature(sa.kind, sa.gates, "AcceleratorError", sa.needs, message=old_text + " for more information.")
    assert old.fails_alike(a) and not old.fails_alike(misaligned)


def test_a_signature_cut_by_its_budget_says_its_needs_were_not_measured():
    """FA4 on the H100 (2026-12-07, 16 campaigns side by side): findings whose signature ran no
    variation, or one, before the deadline, read "needs nothing found (fails on every variation)",
    as if the bug were everywhere. A signature the budget cut says so, keeps its variation count
    through a report (merge re-read every signature with 0 variations), and keeps its id. Fails on
    a8d14cd."""
    from difftest.judge.runner import CaseResult
    from difftest.search.signature import derive
    from difftest.vocab import Status

    p = Problem(head_dim_qk=8, head_dim_v=8, heads_q=2, heads_kv=1, causal=True)
    bad = CaseResult("k", p, Status.ERROR, "RuntimeError: boom", error_type="RuntimeError")
    calls = []

    def run(q):
        calls.append(q)
        return bad

    cut = derive(bad, run, budget_calls=1)
    # causal ran (and failed alike); gqa, the switch the budget left, is held until measured
    assert len(calls) == 1 and cut.tried == 1 and not cut.complete and cut.needs == (("gqa", True),)
    assert cut.assumed == ("gqa",)
    assert cut.describe().endswith(
        "needs not measured (held at gqa until measured; the budget ran out after 1 variation)"
    )
    assert "fails on every variation" not in cut.describe()
    full = derive(bad, run)  # every variation ran and failed alike: that is "fails on every variation"
    assert full.complete and full.needs == () and full.assumed == ()
    assert full.describe().endswith("needs nothing found (fails on every variation)")
    back = Signature.from_dict(cut.to_dict())
    assert (back.tried, back.complete, back.id, back.describe()) == (1, False, cut.id, cut.describe())
    assert back.assumed == ("gqa",)
    assert Signature.from_dict(full.to_dict()).complete and "variations_complete" not in full.to_dict()
    # a need found before the cut is kept, and the text says more may be missing
    passing = CaseResult("k", p, Status.PASSED, "")
    some = derive(bad, lambda q: passing if not q.causal else bad, budget_calls=1)
    assert dict(some.needs) == {"causal": True, "gqa": True} and not some.complete
    assert some.describe().endswith(
        "needs causal (maybe more: held at gqa until measured; the budget ran out after 1 variation)"
    )
    for wrong in ("yes", 1):
        with pytest.raises(SignatureError):
            Signature.from_dict({**cut.to_dict(), "variations_complete": wrong})
    with pytest.raises(SignatureError):
        Signature.from_dict({**cut.to_dict(), "variations_run": -1})
    for wrong in ("gqa", ["causal"], [1]):  # held needs are among the needs
        with pytest.raises(SignatureError):
            Signature.from_dict({**cut.to_dict(), "needs_assumed": wrong})


def test_a_signature_cut_by_its_budget_explains_only_the_configuration_it_was_seen_at():
    """FA4 4.0.0b25 on the H100 (2026-12-07): a ``cudaErrorInvalidValue`` launch failure shrunk to
    dense head dims 192/232, and its signature ran out of budget before any need was found; with no
    needs it explained every launch failure of that message, so the empty-sequence launch failure
    (needs varlen, a fixed upstream bug) was never hunted and came back as none of its own. A
    cut signature holds the switches and choices it did not measure at its shrunk Problem's values
    until they are; and a kernel error whose rule claims to fail where the other's signing saw it
    pass (the empty sequence filled, dense) is another trigger, not the same bug. Fails on b2dd52a."""
    from difftest.judge.runner import CaseResult
    from difftest.model.capability import Capability
    from difftest.search.signature import derive, merged, same_identity
    from difftest.vocab import Status

    text = "RuntimeError: CUDA launch failed: cudaErrorInvalidValue (1)"
    cap = Capability(
        head_dims_qk=(64, 128, 192, 256),
        head_dims_v=(64, 128, 192, 232, 256),
        dtypes=("float16", "bfloat16"),
        equal_head_dims=False,
        varlen=True,
        empty_seqs=True,
    )
    dense = Problem(head_dim_qk=192, head_dim_v=232, dtype="float16")
    bad = CaseResult("k", dense, Status.ERROR, text, error_type="RuntimeError")
    cut = derive(bad, lambda q: bad, cap, budget_calls=1)  # dims_differ ran and failed alike, then the budget ended
    assert not cut.complete and {"head_dim_qk", "dtype"} <= set(cut.assumed)
    assert dict(cut.needs)["head_dim_qk"] == (192,) and "dims_differ" not in dict(cut.needs)
    empty = Problem(batch=2, seqlen_q=(3, 5), seqlen_k=(0, 4), head_dim_qk=64, head_dim_v=64, dtype="float16")
    launch = CaseResult("k", empty, Status.ERROR, text, error_type="RuntimeError")
    assert cut.fails_alike(launch) and not cut.explains(launch)  # hunted, not swallowed
    full = derive(bad, lambda q: bad, cap)  # measured everywhere: it does fail everywhere, and says so
    assert full.complete and full.needs == () and full.explains(launch)

    # the empty-sequence finding, signed with its needs (filling the empty key or going dense passed)
    passed = CaseResult("k", empty, Status.PASSED, "")
    seq = derive(launch, lambda q: launch if q.varlen and 0 in q.seqlen_k else passed, cap)
    assert {"varlen", "empty_k"} <= set(dict(seq.needs))
    # a rule with no measured needs claims the dense Problem that passed: two triggers, two bugs
    assert not same_identity(full, seq, empty, dense) and not same_identity(seq, full, dense, empty)
    assert not same_identity(cut, seq, empty, dense) and not same_identity(seq, cut, dense, empty)
    # without the shrunk Problems nothing contradicts (older records): nested switches, one bug
    assert same_identity(full, seq)
    # a wrong result is never split this way: a fault's visibility depends on where a shrink stopped
    wrong_a, wrong_b = _sig(causal=True), _sig(causal=True, sinks=True)
    assert same_identity(wrong_a, wrong_b, Problem(causal=True, sinks=True), Problem(causal=True))
    # a switch only held is no trigger: a cut signature holding gqa is the same bug as one needing sinks
    held_gqa = Signature("wrong result", ("dk:budget",), "", (("gqa", True),), complete=False, assumed=("gqa",))
    assert same_identity(held_gqa, _sig(sinks=True)) and not same_identity(_sig(gqa=True), _sig(sinks=True))
    # held needs merge as measured where the other measured them
    both = merged(cut, derive(bad, lambda q: bad, cap, budget_calls=2))
    assert set(both.assumed) <= set(cut.assumed) and set(both.assumed) <= {n for n, _ in both.needs}


class TwoLaunchFailures(RefKernel):
    """One CUDA error message, two triggers (FA4 4.0.0b25 on the H100, 2026-12-07): the launch
    fails at head dim 16 whatever else, and with an empty key sequence whatever the head dim."""

    name = "test-two-launch-failures"
    spec = "tests.test_hunt:TwoLaunchFailures"

    def backward(self, inputs, fwd, ctx, out=None):
        p = inputs.problem
        if p.head_dim_qk == 16 or (p.varlen and 0 in p.seqlen_k):
            raise RuntimeError("CUDA launch failed: cudaErrorInvalidValue (1)")
        return super().backward(inputs, fwd, ctx, out)


def test_two_triggers_of_one_error_are_two_findings_when_a_signature_is_cut(tmp_path, monkeypatch):
    """Each finding's signature gets one variation (the budget a loaded GPU left FA4 b25's): the
    first found must not explain the other trigger's cases for want of measured needs, nor be
    folded with it. Fails on b2dd52a (one finding: the first, with no needs, took every launch
    failure)."""
    monkeypatch.setattr("difftest.search.hunt.MAX_VARIATIONS", 1)
    problems = [
        Problem(batch=1, seqlen_q=5, seqlen_k=7, head_dim_qk=16, head_dim_v=16),
        Problem(batch=2, seqlen_q=(3, 4), seqlen_k=(0, 6), head_dim_qk=8, head_dim_v=8),
        Problem(batch=1, seqlen_q=6, seqlen_k=9, head_dim_qk=8, head_dim_v=8),
    ]
    for order in (problems, problems[1:] + problems[:1]):  # either trigger met first
        r = Campaign.of(
            TwoLaunchFailures(),
            "ci",
            strategy=st.sampled_from(order),
            edge_cases=False,
            out_dir=tmp_path / str(len(order) - order.index(problems[0])),
            config=RunConfig(isolate=False),
            hunt=True,
            max_examples=12,
            database=None,
        ).run()
        new = [f for f in r.findings if not f.known]
        assert len(new) == 2, "\n".join(f.signature.describe() for f in new)
        varlen = [f for f in new if _needs(f).get("varlen")]
        assert len(varlen) == 1 and varlen[0].best.problem.varlen
        other = next(f for f in new if f is not varlen[0])
        assert other.best.problem.head_dim_qk == 16 and not other.best.problem.varlen


def test_findings_a_later_merge_made_one_bug_are_folded_at_the_end():
    """cuDNN 9.19 on the H100 (2026-12-07): a hunt kept dQ (its case's dK/dV gates were already
    another finding's) beside dK/dV of the same head-dim family; the dQ rule later took in dV
    from a variation, and both findings stayed. ``folded`` joins them; a known finding and a
    finding of another output nothing joins stay apart."""
    from difftest.search.findings import Finding
    from difftest.search.hunt import folded

    kind = "wrong result"
    dkdv = Finding(Signature(kind, ("dk:budget", "dv:budget"), "", ()), number=1)
    dq = Finding(Signature(kind, ("dq:budget",), "", ()), number=2)
    lse = Finding(Signature(kind, ("lse:budget",), "", (("sinks", True),)), number=3)
    known = Finding(Signature(kind, ("dk:budget",), "", ()), known=True)
    assert folded([dkdv, dq, lse, known]) == [dkdv, dq, lse, known]  # nothing in common yet
    dq.variants.append(Signature(kind, ("dq:budget", "dv:budget"), "", ()))  # a variation showed dV too
    got = folded([dkdv, dq, lse, known])
    assert got == [dkdv, lse, known] and dq.signature in dkdv.variants
    assert set(dkdv.signature.gates) == {"dk:budget", "dv:budget", "dq:budget"}


def test_a_bug_of_every_large_head_dim_is_signed_by_its_head_dims():
    """cuDNN 9.19 on the H100 (2026-12-07): wrong gradients at every d_qk > 128 were tried at the
    nearest dims (160, 176) and the largest (256), all failing, and read "needs nothing found
    (fails on every variation)". A head dim in the upper half of the declared range is now also
    tried at the smallest, the far end, so the signature names the head dims. Fails on 7c78c44."""
    from difftest.judge.gates import Verdict
    from difftest.judge.runner import CaseResult
    from difftest.model.capability import Capability
    from difftest.search.signature import derive
    from difftest.vocab import Status

    cap = Capability(dtypes=("float16",), head_dims_qk=tuple(range(8, 257, 8)), device="cpu")
    p = Problem(head_dim_qk=168, head_dim_v=168, dtype="float16")

    def run(q):  # the kernel: dQ wrong whenever head_dim_qk > 128
        wrong = q.head_dim_qk > 128
        verdicts = [Verdict("dq", "budget", not wrong)]
        return CaseResult("k", q, Status.FAILED if wrong else Status.PASSED, "", verdicts=verdicts)

    sig = derive(run(p), run, cap)
    needs = dict(sig.needs)
    assert sig.complete and set(needs) == {"head_dim_qk"}, sig.describe()
    assert 168 in needs["head_dim_qk"] and 8 not in needs["head_dim_qk"]
    assert "nothing found" not in sig.describe()


def test_one_error_raised_in_two_dtypes_is_one_finding_and_old_records_still_know_it():
    """FA4 b25 on the H100 (2026-12-07): CuTe DSL's "Misaligned Tensor data on argument #0 ...
    Tensor([n0, ...], float16)" and its bfloat16 twin had two message shapes, so the float16
    finding needed dtype=float16 (its bfloat16 variation failed "differently"), a second
    finding took bfloat16, and a bfloat16 case stayed unexplained. A dtype's name is now
    ``<dtype>`` in a message's shape; a signature recorded by the rule before still explains it."""
    from difftest.judge.runner import CaseResult
    from difftest.model.capability import Capability
    from difftest.search.signature import _text_shape, derive, message_shape
    from difftest.vocab import Status

    def raised(p):
        dt = p.dtype
        msg = f"ValueError: Misaligned Tensor data on argument #0 when calling: `__call__(mQ: Tensor([n0, n1], {dt}))`"
        return CaseResult("k", p, Status.ERROR, msg, error_type="ValueError")

    cap = Capability(dtypes=("float16", "bfloat16"), head_dims_qk=(64, 128), device="cpu")
    p = Problem(head_dim_qk=64, head_dim_v=64, dtype="float16")
    assert message_shape(raised(p).reason) == message_shape(raised(p.replace(dtype="bfloat16")).reason)
    assert message_shape("ValueError: bad tile") != message_shape(raised(p).reason)
    sig = derive(raised(p), raised, cap)
    assert "dtype" not in dict(sig.needs), sig.describe()
    assert sig.explains(raised(p.replace(dtype="bfloat16")))
    old = dataclasses.replace(sig, message=_text_shape(raised(p).reason, layouts=True, dtypes=False))
    assert old.message != sig.message and old.fails_alike(raised(p))


@pytest.mark.slow
def test_a_kernel_that_corrupts_its_process_is_signed_where_its_bug_shows_alone(tmp_path):
    """cuDNN 9.19's nightly on the H100 (2026-12-07): wrong results at d_qk > 128 with a smaller
    d_v left the kernel's process corrupt, so the shrinks and variations after them failed
    wherever they went. Signed there, the findings said "needs nothing found (fails on every
    variation)" and 4 of 19 reproducers passed when replayed alone. Checked in a fresh process,
    the bug keeps its need (unequal head dims) and the cases that failed only after it are
    said to be such, never signed as bugs of their own."""
    from difftest.execute.isolation import close_all
    from tests.kernels_for_tests import CorruptsItsProcess

    unequal = Problem(seqlen_q=9, seqlen_k=11, head_dim_qk=16, head_dim_v=8, dtype="float32")
    equal = [
        Problem(seqlen_q=s, seqlen_k=s + 1, head_dim_qk=d, head_dim_v=d, dtype="float32") for s, d in ((5, 8), (7, 16))
    ]
    try:
        r = Campaign.of(
            CorruptsItsProcess(),
            "nightly",
            max_examples=6,
            time_budget=240,
            shrink_budget=20,
            seed=3,
            strategy=st.sampled_from([unequal, *equal]),
            edge_cases=False,
            database=None,
            out_dir=tmp_path,
            config=RunConfig(isolate=True, timeout_s=120),
            fresh_process=True,
        ).run()
    finally:
        close_all()
    sigs = [f.signature for f in r.findings if not f.known]
    assert sigs, r.status
    measured = [s for s in sigs if not s.history]
    assert len(measured) == 1, [s.describe() for s in sigs]
    assert dict(measured[0].needs).get("dims_differ") is True, measured[0].describe()
    (real,) = [f for f in r.findings if not f.signature.history]  # shrunk where each step's verdict is its own
    assert real.best.problem.size() < unequal.size() and real.best.problem.head_dim_qk != real.best.problem.head_dim_v
    for s in sigs:
        assert "nothing found" not in s.describe(), s.describe()
    for s in sigs:  # whatever failed only after the corrupting case: said so, its needs held, one finding,
        # and the case after which it fails in a fresh process named
        if s.history:
            assert "in the same kernel process (passed in a fresh one" in s.describe(), s.describe()
            assert not s.complete or s.assumed
            after = s.after
            assert "d16/8" in after or "d8/16" in after, s.describe()
    assert sum(s.history for s in sigs) <= 1
    assert r.settings.get("fresh_checks", 0) >= 1
    (hist,) = [f for f in r.findings if f.signature.history]
    _replays_only_after_its_culprit(hist, tmp_path)


def _replays_only_after_its_culprit(finding, tmp_path):
    """A history-dependent finding's reproducer runs the Problem its signature names first, in the
    same process, and fails so; the same record without it passes (it reads what P left behind)."""
    from difftest.search.reproducer import replay
    from tests.kernels_for_tests import CorruptsItsProcess

    record = json.loads(Path(finding.reproducer["json"]).read_text())
    (first,) = record["before"]
    assert Problem.from_dict(first).short() == finding.signature.after
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps({k: v for k, v in record.items() if k != "before"}))
    try:
        CorruptsItsProcess.corrupted = False
        assert not replay(alone, allow_import=True).failed
        CorruptsItsProcess.corrupted = False
        r = replay(finding.reproducer["json"], allow_import=True)
        assert r.failed and any("replayed after" in n for n in r.notes), r.render()
        CorruptsItsProcess.corrupted = False
        script = subprocess.run(
            [sys.executable, finding.reproducer["py"]],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": ROOT},
        )
        assert script.returncode == 1 and "first:" in script.stdout, script.stdout + script.stderr
    finally:
        CorruptsItsProcess.corrupted = False


def test_a_history_dependent_signature_is_one_bug_with_no_measured_rule():
    """Its needs are held, never measured: it joins no finding with a measured rule (cuDNN's merged
    nightly: "needs nothing found" signatures took in every wrong result sharing a gate, four bugs
    became two findings), and two such on one output are one finding; it survives its record."""
    from difftest.search.signature import same_identity, widening

    held = Signature(
        "wrong result", ("dq:budget",), needs=(("head_dim_qk", (16,)),), complete=False, assumed=("head_dim_qk",)
    )
    hist = dataclasses.replace(held, history=True)
    measured = Signature("wrong result", ("dq:budget",), needs=(("dims_differ", True), ("head_dim_qk", (16,))))
    assert same_identity(held, measured)  # the budget-cut rule: held switches and choices claim nothing
    assert not same_identity(hist, measured) and not same_identity(measured, hist)
    other = dataclasses.replace(hist, needs=(("head_dim_qk", (8,)),))
    assert same_identity(hist, other)
    assert not same_identity(hist, dataclasses.replace(other, gates=("dk:budget",)))
    back = Signature.from_dict(json.loads(json.dumps(hist.to_dict())))
    assert back.history and "only after other cases ran" in back.describe()
    from difftest.search.findings import Finding

    at = Problem(head_dim_qk=16, head_dim_v=16)
    assert Finding(held).explains_problem(at) and not Finding(hist).explains_problem(at)  # it steers nothing
    named = Signature.from_dict({**hist.to_dict(), "after": "b1 sq9 sk11 h1/1 d16/8 float32"})
    assert "only after b1 sq9 sk11 h1/1 d16/8 float32 ran in the same kernel process" in named.describe()
    assert widening(hist, Problem(head_dim_qk=8, head_dim_v=8), Problem(head_dim_qk=16, head_dim_v=16)) is None
    with pytest.raises(SignatureError, match="history_dependent"):
        Signature.from_dict({**hist.to_dict(), "history_dependent": "yes"})


def test_a_shrink_stays_with_its_cuda_error_where_one_exception_class_carries_several():
    """FA4 b25 on the H100 (2026-12-07): the empty-sequence launch failure (cudaErrorInvalidValue)
    and an illegal address at small head dims both come back as CuTe DSL's CUDADialectError. The
    shrink of an empty-sequence case took any CUDADialectError as the same failure, walked to a head
    dim that raised the illegal address, and the launch failure ended as no finding at all."""
    from tests.kernels_for_tests import TwoCudaErrors

    empty = Problem(batch=2, seqlen_q=(3, 4), seqlen_k=(0, 5), head_dim_qk=16, head_dim_v=16, dtype="float32")
    r = Campaign.of(  # the empty-sequence case met first, the illegal address not yet found
        TwoCudaErrors(),
        "nightly",
        max_examples=2,
        time_budget=120,
        shrink_budget=10,
        seed=0,
        strategy=st.just(empty),
        edge_cases=False,
        database=None,
        out_dir=None,
        config=RunConfig(isolate=False),
    ).run()
    (own,) = [f for f in r.findings if f.first.problem == empty]  # the empty-sequence case's own hunt
    assert own.signature.error_type == "cudaErrorInvalidValue", own.signature.describe()
    assert 0 in own.best.problem.seqlen_k and own.best.problem.head_dim_qk == 16
    assert dict(own.signature.needs).get("empty_k") is True


@pytest.mark.slow
def test_a_race_is_never_called_history_dependent(tmp_path):
    """A racing output passes a fresh run by chance (the cuDNN dSink race's reproducer passed one of
    two replays on the H100): a nondeterminism finding gets no fresh-process check, and a wrong
    result with a racing output is history-dependent only when three fresh runs all pass."""
    from difftest.execute.isolation import close_all
    from tests.kernels_for_tests import RacingDq

    try:
        r = Campaign.of(
            RacingDq(),
            "nightly",
            max_examples=8,
            time_budget=120,
            shrink_budget=5,
            seed=1,
            edge_cases=False,
            database=None,
            out_dir=tmp_path,
            config=RunConfig(isolate=True, timeout_s=120, determinism_runs=2),
            fresh_process=True,
        ).run()
    finally:
        close_all()
    assert r.findings, r.status
    assert not any(f.signature.history for f in r.findings), [f.signature.describe() for f in r.findings]
    assert r.settings.get("history_dependent", 0) == 0


class PredExceptAt24(RefKernel):
    """A JIT kernel whose backward fails to build at every head dim but 24 (FA4 4.0.0b25's
    predicate error in miniature: 48 (d_qk, d_v) pairs, no rule of needs describes them), and a dK
    bug under a causal mask where it builds."""

    name = "test-pred-except-24"
    spec = "tests.test_hunt:PredExceptAt24"
    capability = dataclasses.replace(
        SMALL, head_dims_qk=(8, 16, 24, 32, 40), compile_key=("dtype", "head_dim_qk", "head_dim_v")
    )

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.head_dim_qk != 24:
            raise RuntimeError("PredError: 'cute.copy' op expects pred shape to match")
        if p.causal:
            out.dk = out.dk * 1.05
        return out


def test_a_build_error_that_needs_nothing_found_is_not_run_again_at_a_key_it_raised_at(tmp_path):
    """An error every variation raised too signs "needs nothing found", and such a signature steered
    nothing (it would claim every Problem): FA4 4.0.0b25's predicate error took 176 of 885 H100 cases,
    many at compile keys where it had raised already. Now a drawn Problem of a key where the error
    raised is explained by it and not run; keys where it never raised still run, and the bug that
    lives there is found. Fails on the old code (nothing skipped)."""
    base = Problem(batch=1, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8)
    problems = [
        base.replace(head_dim_qk=d, head_dim_v=d, causal=c, seqlen_k=7 + i, seed=i)
        for d in (8, 16, 24)
        for c in (False, True)
        for i in range(3)
    ]
    r = _hunted(PredExceptAt24(), problems, tmp_path)
    new = [f for f in r.findings if not f.known]
    errors = [f for f in new if f.signature.error_type]
    assert len(errors) == 1 and not errors[0].signature.needs, [f.signature.describe() for f in new]
    assert errors[0].skipped > 0 and r.explained_skipped >= errors[0].skipped
    events = [json.loads(x) for x in (tmp_path / "test-pred-except-24.cases.jsonl").read_text().splitlines()]
    wrong = [f for f in new if not f.signature.error_type]
    assert len(wrong) == 1 and dict(wrong[0].signature.needs).get("causal") is True, [
        f.signature.describe() for f in new
    ]
    assert any(e["event"] == "case" and e["problem"]["head_dim_qk"] == 24 for e in events)


def test_a_hunts_steps_do_not_build_where_a_needs_nothing_error_raises_every_time(tmp_path):
    """The shrink steps and signature variations of a bug at head dim 24 moved to head dims 8 and 16,
    where a build error that needs nothing found had raised already: each such run raised it again
    and said nothing of the bug (FA4 4.0.0b25 on the H100, four shards merged: 87 of 151 predicate-error
    cases ran at compile keys that had raised it). Those steps are not run now; the bug is still signed
    (the head dims it could not try are held). Fails on the old code (the steps ran)."""
    base = Problem(batch=1, seqlen_q=5, seqlen_k=7, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8)
    broken = [base.replace(head_dim_qk=d, head_dim_v=d, seed=i, seqlen_k=7 + i) for d in (8, 16) for i in range(3)]
    bug = base.replace(head_dim_qk=24, head_dim_v=24, causal=True, seqlen_q=9, seqlen_k=12)
    r = _hunted(PredExceptAt24(), broken + [bug], tmp_path)
    wrong = [f for f in r.findings if not f.known and not f.signature.error_type]
    assert len(wrong) == 1 and dict(wrong[0].signature.needs).get("causal") is True, [
        f.signature.describe() for f in r.findings
    ]
    events = [json.loads(x) for x in (tmp_path / "test-pred-except-24.cases.jsonl").read_text().splitlines()]
    key = lambda p: (p["dtype"], p["head_dim_qk"], p["head_dim_v"])  # noqa: E731
    raised, hunting, wasted = set(), False, []
    for e in events:
        if e["event"] == "hunt":
            hunting = e["problem"]["head_dim_qk"] == 24
        elif e["event"] == "finding":
            hunting = False
        elif e["event"] == "case" and e["status"] == "error":
            if hunting and key(e["problem"]) in raised:
                wasted.append(e["problem"])
            raised.add(key(e["problem"]))
    assert not wasted, wasted
    assert "head_dim_qk" in wrong[0].signature.assumed  # the head dims it could not try: held, not measured
