"""``difftest bench --oracle``: the float64 truth timed next to FA3 from one run. On a
machine without CUDA it must still time the truth (so it is testable here) and say why the
kernel column is missing; the truth it times is the one the runner uses."""

import json

import pytest
import torch

from difftest.commands.cli import main
from difftest.measure.bench import oracle_markdown, run_oracle_bench


def test_oracle_bench_times_the_truth_and_says_why_fa3_is_missing(tmp_path, capsys):
    out = tmp_path / "o.json"
    md = tmp_path / "o.md"
    rc = main(
        [
            "bench",
            "--oracle",
            "--device",
            "cpu",
            "--shape",
            "1,2,96,16",
            "--unskipped",
            "--eager",
            "--json",
            str(out),
            "--markdown",
            str(md),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["shape"] == [1, 2, 96, 16]
    truth, full, eager = rows[0]["truth"], rows[0]["truth_unskipped"], rows[0]["truth_eager"]
    assert truth["status"] == full["status"] == eager["status"] == "ok" and truth["seconds"] > 0
    assert truth["skip_masked"] and not full["skip_masked"]
    assert truth["passes"] == eager["passes"] == "eager"  # no fused passes on the CPU
    fa3 = rows[0]["kernels"]["fa3"]
    assert fa3["status"] == "skipped" and "CUDA" in fa3["reason"]
    assert "truth" in capsys.readouterr().out and "sq96" in md.read_text()
    assert "| eager s | eager peak GiB |" in md.read_text()


def test_oracle_bench_rejects_a_bad_shape_in_one_line(capsys):
    assert main(["bench", "--oracle", "--shape", "1,2,96"]) == 2
    err = capsys.readouterr().err
    assert "B,H,S,D" in err and err.count("\n") == 1


def test_plain_bench_still_needs_a_kernel(capsys):
    assert main(["bench"]) == 2
    assert "--kernel" in capsys.readouterr().err


def test_oracle_rows_render_as_markdown():
    rows = run_oracle_bench([(1, 1, 40, 8)], kernels=("fa3",), device="cpu", log=lambda s: None)
    text = oracle_markdown(rows)
    assert text.count("\n") == 2 and "cpu" in text
    if not torch.cuda.is_available():
        assert "skipped" in text


class _Capped:
    """A stand-in kernel: capability up to 8192 keys, bfloat16 only; ``available`` says
    what time_backward would do next (it needs CUDA, so the test stops there)."""

    name = "capped"

    def __init__(self):
        from difftest.model.capability import Capability

        self.capability = Capability(
            dtypes=("bfloat16",), head_dims_qk=(128,), max_seqlen=8192, max_heads=8, causal=True, device="cuda"
        )

    def available(self):
        return "reached the timing"


def test_oracle_bench_times_a_kernel_past_its_max_seqlen_but_nothing_else():
    from difftest.measure.bench import time_backward
    from difftest.model.problem import Problem

    k = _Capped()
    p = Problem(
        seqlen_q=16384,
        seqlen_k=16384,
        heads_q=8,
        heads_kv=8,
        head_dim_qk=128,
        head_dim_v=128,
        dtype="bfloat16",
        causal=True,
    )
    # the plain bench keeps the campaign's limit
    assert time_backward(k, p)["reason"] == "sequence longer than 8192"
    # the oracle bench passes the length check (and only it)
    assert time_backward(k, p, beyond_max_seqlen=True)["reason"] == "reached the timing"
    assert "float16" in time_backward(k, p.replace(dtype="float16"), beyond_max_seqlen=True)["reason"]


@pytest.mark.slow
def test_inputs_bench_times_each_kind_and_compares_bytes_with_another_checkout(tmp_path, capsys):
    """``difftest bench --inputs``: make_inputs per value kind; ``--before DIR`` times another
    checkout (here this one again) on the same Problems and says the bytes are the same."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out, md = tmp_path / "i.json", tmp_path / "i.md"
    rc = main(
        [
            "bench",
            "--inputs",
            "--device",
            "cpu",
            "--shape",
            "1,2,24,16",
            "--dtype",
            "bfloat16",
            "--kind",
            "normal",
            "--kind",
            "loss_do",
            "--inputs-repeats",
            "1",
            "--before",
            str(root),
            "--count-ops",
            "--json",
            str(out),
            "--markdown",
            str(md),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["kind"] for r in rows] == ["normal", "loss_do"]
    assert all(r["same_bytes"] and r["seconds"] > 0 and r["before_seconds"] > 0 for r in rows)
    assert all(r["ops"] == r["before_ops"] > 0 and r["host_syncs"] == r["before_host_syncs"] for r in rows)
    assert rows[1]["ops"] > rows[0]["ops"]  # loss_do's forward on top of the normal draws
    assert "| loss_do |" in md.read_text() and "| yes |" in md.read_text()


def test_inputs_bench_refuses_an_unknown_kind_or_a_folder_without_difftest(tmp_path, capsys):
    assert main(["bench", "--inputs", "--kind", "gaussian"]) == 2
    assert main(["bench", "--inputs", "--before", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "gaussian" in err and str(tmp_path) in err and err.count("\n") == 2


@pytest.mark.slow
def test_case_bench_splits_each_campaign_s_framework_time_per_case(tmp_path, capsys, monkeypatch):
    """``difftest bench --cases``: a campaign per kernel in a child process, alone and side by
    side; per kernel the cases, the framework ms per case and its phases, and with
    --count-ops the ATen ops and host reads per case and phase (this process's)."""
    monkeypatch.chdir(tmp_path)
    out, md = tmp_path / "c.json", tmp_path / "c.md"
    # the tests' reference kernel (its edge corpus 73 Problems at S <= 48) instead of
    # torch-blockwise (155 up to S = 160): the same campaigns, phases and counts, each mode
    # (alone, side by side) in a child process, at two thirds of the time (26 s against 39 s here)
    ref = "tests.kernels_for_tests:RefKernel"
    rc = main(
        [
            "bench",
            "--cases",
            "-k",
            ref,
            "--examples",
            "3",
            "--case-profile",
            "quick",
            "--mode",
            "both",
            "--count-ops",
            "--json",
            str(out),
            "--markdown",
            str(md),
        ]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["mode"], r["kernel"]) for r in rows] == [("alone", ref), ("side", ref)]
    for r in rows:
        assert r["cases"] > 3 and r["failed_cases"] == 0 and r["framework_ms_mean"] > 0
        assert {"truth", "yardsticks", "gates", "inputs"} <= set(r["phases_ms"])
        assert r["ops_per_case"]["gates"] > 0 and r["reads_per_case"]["gates"] >= 1
    assert "| framework ms/case |" in md.read_text() and "ATen ops/case" in capsys.readouterr().out
