"""One unattended nightly campaign reports every fault of a kernel whose eight faults each sit
at one corner of an FA4-like interface (kernels/corner_faults.py), each as its own finding.

The CPU stand-in for issue-style measurements on old FlashAttention 4 betas: before the
coverage phase, draws reached head dims, GQA ratios and mixed head dims by luck (81% of an FA4
campaign ran head dim 8) and one fault came back split into several findings; this campaign,
nothing narrowed, must name all eight, once each, each with the need that places it."""

import dataclasses

import pytest

from difftest.judge.runner import RunConfig
from difftest.kernels.corner_faults import CornerFaults
from difftest.model.profiles import get_profile
from difftest.search.campaign import run_campaign

# the nightly profile (its sizes, coverage phase and hunt) ending when its coverage phase and
# 10 drawn examples are done, instead of drawing until its budget is spent: CI's time is then
# the campaign's work, not a wall-clock budget a loaded runner may not reach the end of (the
# drawn examples are nightly-sized: about a second each on a CPU)
NIGHTLY_TO_THE_END = dataclasses.replace(get_profile("nightly"), fill_budget=False, examples=10)
# every fault sits at a corner of one or two dimensions: covering every pair (t = 2) is what
# must meet them; the t = 3 stage runs in the whole-interface test
PAIRWISE_NIGHTLY = dataclasses.replace(NIGHTLY_TO_THE_END, coverage=2)


def _needs(f) -> dict:
    return dict(f.signature.needs)


class SixHeadDims(CornerFaults):
    """The same kernel declaring six of its 32 head dims (each fault's among them): the default
    CI run's campaign, a fifth of the full one's cases."""

    name = "corner-faults-6"
    spec = "tests.test_corner_faults:SixHeadDims"
    capability = CornerFaults.capability.narrowed(
        head_dims_qk=(8, 40, 88, 136, 192, 256), head_dims_v=(8, 40, 88, 136, 192, 256)
    )


def test_one_nightly_campaign_reports_each_corner_fault_once(tmp_path):
    _check(
        run_campaign(
            SixHeadDims(),
            PAIRWISE_NIGHTLY,
            time_budget=600,
            database=None,
            out_dir=tmp_path,
            config=RunConfig(isolate=False),
        ),
        SixHeadDims.capability,
        stage="t=2",
    )


# covered in the default run: the same eight faults, once each, by
# test_one_nightly_campaign_reports_each_corner_fault_once (t = 2, six head dims); the t = 3
# stage by test_configurations.py::test_the_t3_stage_covers_every_claimed_triple_and_runs_no_row_that_covers_nothing
@pytest.mark.slow
def test_one_nightly_campaign_over_the_whole_interface(tmp_path):
    """All 32 head dims of each side, to the end of the t = 3 stage: 30 s on this CPU since the
    coverage phase stopped re-running rows that cover nothing (399 s and 3,978 cases before)."""
    _check(
        run_campaign(
            CornerFaults(),
            NIGHTLY_TO_THE_END,
            time_budget=900,
            database=None,
            out_dir=tmp_path,
            config=RunConfig(isolate=False),
        ),
        CornerFaults.capability,
        stage="t=3",
    )


def _check(r, capability, stage):
    assert r.coverage["pairs"]["phase"]["stage"] == stage, r.coverage["pairs"]["phase"]  # not cut by the budget
    new = [f for f in r.findings if not f.known]
    described = "\n".join(f.signature.describe() for f in new)
    assert len(new) == 8, described
    by = {}
    for f in new:
        s = f.signature
        key = s.error_type or s.gates[0].partition(":")[0]
        if s.error_type == "BuildError":
            key += ":packgqa" if "PackGQA" in s.message else ":smem"
        assert key not in by, described  # one finding per fault
        by[key] = f
    assert set(by) == {
        "RuntimeError",
        "o",
        "BuildError:smem",
        "LegalizeError",
        "dv",
        "dsink",
        "dq",
        "BuildError:packgqa",
    }, described
    assert _needs(by["RuntimeError"]).get("empty_k") is True  # the empty key sequence
    assert _needs(by["o"]).get("causal") is True  # the causal diagonal on seqlen_q > seqlen_k
    # not a tail: rounding seqlen_k up past seqlen_q removes the rows that see no key (e929a59)
    assert not {"seqlen_q%", "seqlen_k%"} & set(_needs(by["o"])), by["o"].signature.describe()
    assert set(_needs(by["BuildError:smem"])["head_dim_qk"]) == {  # the backward-only range
        d for d in capability.head_dims_qk if 136 <= d <= 184
    }
    assert _needs(by["LegalizeError"]).get("dims_differ") is True  # mixed head dims
    assert _needs(by["dv"]).get("window") is True and _needs(by["dv"]).get("seqlen_k>=", 0) > 128  # long rows
    assert {"gqa", "sinks"} <= set(_needs(by["dsink"]))  # sinks with GQA
    assert _needs(by["dq"]).get("dtype") == ("bfloat16",) and 40 in _needs(by["dq"])["head_dim_qk"]
    assert _needs(by["BuildError:packgqa"]).get("head_dim_qk") == (88,)  # a GQA ratio with a head dim
    assert r.unexplained == 0
    pairs = r.coverage["pairs"]  # every claimed pair ran, or a finding explains it
    assert pairs["covered"] + pairs["explained"] >= 0.99 * pairs["claimed"], pairs["phase"]
