"""Diagnostics that name the cause: a failing output's error by head, by
sequence and by query/key tile, in the verdict, the terminal text and report.json."""

import json

import torch

from difftest.execute import adapter as registry
from difftest.judge.breakdown import breakdown, render
from difftest.judge.runner import run_case
from difftest.model.problem import Problem


def test_gqa_head_map_bug_shows_heads_1_and_2_wrong_0_and_3_right():
    p = Problem(batch=1, seqlen_q=8, seqlen_k=8, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=16).validate()
    case = run_case(registry.get("mutant:gqa-head-modulo"), p)
    assert case.failed
    o = next(v for v in case.verdicts if v.output == "o" and not v.passed)
    heads = o.numbers["breakdown"]["head"]
    assert heads["wrong"] == [1, 2] and heads["right"] == [0, 3]
    assert "by head: wrong 1,2, right 0,3" in o.message and "by head: wrong 1,2, right 0,3" in case.render()
    # report.json carries it
    d = json.loads(json.dumps(case.to_dict(), default=str))
    rec = next(v for v in d["verdicts"] if v["output"] == "o" and not v["passed"])
    assert rec["numbers"]["breakdown"]["head"]["wrong"] == [1, 2]


def test_a_correct_kernel_gets_no_breakdown():
    p = Problem(batch=1, seqlen_q=8, seqlen_k=8, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=16).validate()
    case = run_case(registry.get("torch-blockwise"), p)
    assert case.status == "passed" and all("breakdown" not in v.numbers for v in case.verdicts)


def test_sequences_and_tiles_of_a_varlen_output():
    p = Problem(
        batch=3, seqlen_q=(5, 0, 9), seqlen_k=(5, 3, 9), heads_q=2, heads_kv=2, head_dim_qk=8, head_dim_v=8, pad_tail=2
    ).validate()
    truth = torch.zeros(p.total_q, 2, 8, dtype=torch.float64)
    got = truth.clone().float()
    got[5 + 4 + 0, 1, 3] = 1.0  # sequence 2, token 4: first tile of 4 rows is 0..3, so tile 1
    got[-1] = float("nan")  # an unused tail row: never judged
    b = breakdown(p, "dq", got, truth, limit=0.5, block=4)
    assert b["sequence"] == {"index": [0, 2], "max_err": [0.0, 1.0], "wrong": [2], "right": [0]}
    assert b["tile"]["wrong"] == [1] and b["tile"]["right"] == [0, 2] and b["tile_side"] == "query"
    assert b["head"]["wrong"] == [1] and b["head"]["right"] == [0]
    assert render(b) == (
        "by head: wrong 1, right 0; by sequence: wrong 2, right 0; by query tile of 4 rows: wrong 1, right 0,2"
    )


def test_nonfinite_mismatch_counts_as_wrong_and_equal_infinities_as_right():
    p = Problem(batch=1, seqlen_q=2, seqlen_k=2, heads_q=2, heads_kv=2, head_dim_qk=8, head_dim_v=8).validate()
    truth = torch.zeros(2, 2, dtype=torch.float64)
    truth[0, 0] = float("-inf")
    got = truth.clone().float()
    got[1, 1] = float("nan")
    b = breakdown(p, "lse", got, truth, limit=1e-3, block=64)
    assert b["head"]["wrong"] == [1] and b["head"]["right"] == [0]


def test_every_summary_lists_the_features_no_case_exercised():
    from difftest.report.write import markdown_summary
    from difftest.search.campaign import CampaignResult

    passed = CampaignResult("k", "quick", coverage={"hit": {"heads:MHA": 3}, "missing": ["sinks", "varlen:empty_seq"]})
    full = CampaignResult("j", "quick", coverage={"hit": {"heads:MHA": 3}, "missing": []})
    md = markdown_summary([passed, full])
    assert "- **k**: `sinks`, `varlen:empty_seq`" in md and "- **j**: none" in md
