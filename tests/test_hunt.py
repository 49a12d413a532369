"""Hunting: a campaign that goes on after a failure reports each distinct bug once, with a
signature (difftest/search/signature.py), its shrunk reproducer, how many cases hit it and
when it was first seen. Kernels here carry several independent faults at once, as real
kernels do; a campaign that stops at its first failure reports one of them."""

import json

from hypothesis import strategies as st

from difftest import Problem
from difftest.judge.runner import RunConfig
from difftest.search.campaign import Campaign
from tests.kernels_for_tests import RefKernel


@st.composite
def small(draw):
    """Small Problems where every fault below is reachable: causal, sinks, GQA, both dims."""
    hkv = draw(st.integers(1, 2))
    d = draw(st.sampled_from([8, 16]))
    return Problem(batch=draw(st.integers(1, 2)), seqlen_q=draw(st.integers(1, 24)), seqlen_k=draw(st.integers(1, 40)),
                   heads_q=hkv * draw(st.integers(1, 2)), heads_kv=hkv, head_dim_qk=d, head_dim_v=d,
                   causal=draw(st.booleans()), sinks=draw(st.booleans()), seed=draw(st.integers(0, 99))).validate()


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
    return Campaign.of(kernel, "ci", strategy=small(), edge_cases=False, database=None, out_dir=tmp_path,
                       config=RunConfig(isolate=False), hunt=kw.pop("hunt", True), **kw).run()


def _needs(f) -> dict:
    return dict(f.signature.needs)


def test_three_independent_bugs_give_three_findings(tmp_path):
    r = _hunt(ThreeBugs(), tmp_path)
    assert r.status == "failed" and r.hunt
    assert len(r.findings) == 3, [f.signature.describe() for f in r.findings]
    by_output = {f.signature.gates[0].split(":")[0]: f for f in r.findings}
    assert set(by_output) == {"dk", "dv", "dq"}
    # each signature names the feature its bug needs, and only that switch
    assert _needs(by_output["dk"]).get("causal") is True and "sinks" not in _needs(by_output["dk"])
    assert _needs(by_output["dv"]).get("gqa") is True and "causal" not in _needs(by_output["dv"])
    assert _needs(by_output["dq"]).get("sinks") is True and "gqa" not in _needs(by_output["dq"])
    for f in r.findings:
        assert f.hits >= 1 and f.first_seen["case"] >= 1 and not f.known
        assert f.best.problem.size() <= f.first.problem.size()
        rec = json.loads(open(f.reproducer["json"]).read())
        assert Problem.from_dict(rec["problem"]) == f.best.problem
    assert len({f.reproducer["json"] for f in r.findings}) == 3


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
    assert all(f.signature.gates == ("dk:budget",) for f in r.findings) or \
        all("dk:budget" in f.signature.gates for f in r.findings)
    needs = sorted(tuple(sorted(k for k, v in f.signature.needs if v is True)) for f in r.findings)
    assert needs == [("causal",), ("sinks",)]
