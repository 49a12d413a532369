"""Narrowing a kernel's capability (``--narrow``): a campaign steps around a known
failure and keeps searching, never widens what a kernel claims, and records what it did."""

import json
import os
import subprocess
import sys

import pytest

from difftest.execute import adapter as registry
from difftest.model.capability import NARROWABLE, Capability, parse_narrowing
from difftest.search.campaign import run_campaign
from tests.kernels_for_tests import full_capability


def test_narrowed_capability_covers_less():
    c = full_capability()
    n = c.narrowed(
        **parse_narrowing(["head_dims_qk=16,32", "sinks=false", "max_seqlen=64", "values=normal", "aligns=top_left"])
    )
    assert n.head_dims_qk == (16, 32) and n.sinks is False and n.max_seqlen == 64
    assert n.values == ("normal",) and n.aligns == ("top_left",)
    assert c.head_dims_qk == (16, 32, 64) and c.sinks is True  # the original is untouched


@pytest.mark.parametrize(
    "item, says",
    [
        ("head_dims_qk=16,128", "non-empty subset of (16, 32, 64)"),
        ("max_seqlen=1000", "allowed 1..256"),
        ("dtypes=bfloat16", "subset of ('float32', 'float16')"),
        ("device=cuda", "FIELD in"),
        ("sinks=maybe", "sinks takes true|false"),
        ("max_batch=two", "max_batch takes an integer"),
        ("head_dims_qk", "FIELD in"),
    ],
)
def test_widening_or_malformed_narrowing_is_a_clear_error(item, says):
    with pytest.raises(ValueError) as e:
        full_capability().narrowed(**parse_narrowing([item]))
    assert says in str(e.value) and item.split("=")[0] in str(e.value)


def test_minimum_sequence_lengths_may_only_go_up():
    c = Capability(min_seqlen_k=2)
    n = c.narrowed(**parse_narrowing(["min_seqlen_q=4", "min_seqlen_k=8", "max_seqlen=64"]))
    assert (n.min_seqlen_q, n.min_seqlen_k, n.max_seqlen) == (4, 8, 64)
    assert (c.min_seqlen_q, c.min_seqlen_k) == (1, 2)  # the original is untouched
    assert c.narrowed(min_seqlen_k=2, max_seqlen=2).max_seqlen == 2
    assert {"min_seqlen_q", "min_seqlen_k"} <= set(NARROWABLE)


@pytest.mark.parametrize(
    "items, says",
    [
        (["min_seqlen_k=1"], "narrow min_seqlen_k=1: allowed 2..256"),  # going down widens the claim
        (["min_seqlen_q=257"], "narrow min_seqlen_q=257: allowed 1..256"),
        (["min_seqlen_q=40", "max_seqlen=32"], "narrow max_seqlen=32: allowed 40..256"),
        (["max_seqlen=1"], "narrow max_seqlen=1: allowed 2..256"),  # below the kernel's own minimum
        (["min_seqlen_q=two"], "min_seqlen_q takes an integer"),
    ],
)
def test_lowering_a_minimum_or_crossing_the_maximum_is_a_clear_error(items, says):
    with pytest.raises(ValueError) as e:
        Capability(min_seqlen_k=2).narrowed(**parse_narrowing(items))
    assert says in str(e.value)


def test_turning_a_feature_on_is_refused_but_a_determinism_claim_may_be_asked_for():
    c = Capability(sinks=False)
    with pytest.raises(ValueError, match="sinks=True: allowed False"):
        c.narrowed(sinks=True)
    assert c.narrowed(deterministic=True).deterministic is True
    assert set(NARROWABLE) >= {"dtypes", "head_dims_qk", "sinks", "varlen", "max_seqlen", "deterministic"}


@pytest.mark.slow
def test_campaign_steps_around_a_known_failure(tmp_path):
    bad = registry.get("mutant:dsink-wrong-sign")
    r = run_campaign(bad, "quick", out_dir=tmp_path / "a", database=None, shrink_budget=5)
    assert r.status == "failed" and r.failure.problem.sinks
    around = registry.narrow(bad, sinks=False)
    assert around.capability.sinks is False and bad.capability.sinks is True
    r2 = run_campaign(around, "quick", out_dir=tmp_path / "b", database=None)
    assert r2.status == "passed" and r2.cases and not any(c.problem.sinks for c in r2.cases)
    assert r2.settings["narrowed"] == {"sinks": False}


@pytest.mark.slow
def test_cli_narrow_reaches_the_report_and_bad_values_exit_2(tmp_path, monkeypatch, capsys):
    args = [
        "run",
        "-k",
        "torch-blockwise",
        "--profile",
        "quick",
        "--max-examples",
        "3",
        "--no-edge-cases",
        "--db",
        "none",
        "-q",
    ]
    ok = subprocess.run(
        [sys.executable, "-m", "difftest", *args, "--narrow", "head_dims_qk=16", "--narrow", "varlen=false"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    camp = json.loads((tmp_path / ".difftest" / "out" / "report.json").read_text())["campaigns"][0]
    assert camp["settings"]["narrowed"] == {"head_dims_qk": [16], "varlen": False}
    assert all(c["problem"]["head_dim_qk"] == 16 for c in camp["cases"])
    # refused before any case: in this process (no interpreter and torch import of its own)
    import torch

    from difftest.commands import cli

    bad = tmp_path / "bad"
    bad.mkdir()
    monkeypatch.chdir(bad)
    capsys.readouterr()
    threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    try:
        assert cli.main([*args, "--narrow", "head_dims_qk=17"]) == 2
    finally:  # the run set this process's threads before it refused: put them back
        torch.set_num_threads(threads)
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp
    err = capsys.readouterr().err
    assert "head_dims_qk" in err and "subset of" in err, err
    assert not any(bad.iterdir())  # nothing written
