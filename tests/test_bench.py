"""``difftest bench --oracle``: the float64 truth timed next to FA3 from one run. On a
machine without CUDA it must still time the truth (so it is testable here) and say why the
kernel column is missing; the truth it times is the one the runner uses."""

import json

import torch

from difftest.bench import oracle_markdown, run_oracle_bench
from difftest.cli import main


def test_oracle_bench_times_the_truth_and_says_why_fa3_is_missing(tmp_path, capsys):
    out = tmp_path / "o.json"
    md = tmp_path / "o.md"
    rc = main(["bench", "--oracle", "--device", "cpu", "--shape", "1,2,96,16", "--unskipped",
               "--json", str(out), "--markdown", str(md)])
    assert rc == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["shape"] == [1, 2, 96, 16]
    truth, full = rows[0]["truth"], rows[0]["truth_unskipped"]
    assert truth["status"] == full["status"] == "ok" and truth["seconds"] > 0
    assert truth["skip_masked"] and not full["skip_masked"]
    fa3 = rows[0]["kernels"]["fa3"]
    assert fa3["status"] == "skipped" and "CUDA" in fa3["reason"]
    assert "truth" in capsys.readouterr().out and "sq96" in md.read_text()


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
