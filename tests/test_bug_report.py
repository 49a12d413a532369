"""scripts/bug_report.py: a reproducer becomes a standalone script (no difftest import) plus
its exact inputs, for every adapter kind with a bug report. Each generated script compiles; the
sdpa-math one runs here on the CPU and passes, and the same script with the package's answer
corrupted reports a MISMATCH (so the script's verdict can fail)."""

import json
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

from difftest import Problem

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import bug_report  # noqa: E402

SPECS = {
    "fa4": Problem(
        batch=2,
        seqlen_q=(5, 0),
        seqlen_k=(3, 4),
        heads_q=2,
        heads_kv=1,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="bfloat16",
        sinks=True,
        sink_center=30.0,
    ),
    "fa4-fast": Problem(
        seqlen_q=9, seqlen_k=7, causal=True, head_dim_qk=16, head_dim_v=8, dtype="float16", layout="do_transposed"
    ),  # the docstring names a non-contiguous layout
    "fa3": Problem(seqlen_q=9, seqlen_k=7, window_left=2, head_dim_qk=16, head_dim_v=16, dtype="float16"),
    "sdpa-cudnn": Problem(seqlen_q=9, seqlen_k=7, causal=True, head_dim_qk=16, head_dim_v=16, dtype="float16"),
    "flex": Problem(seqlen_q=9, seqlen_k=7, window_right=1, head_dim_qk=16, head_dim_v=16, dtype="float16"),
    "tileops-gqa": Problem(
        seqlen_q=9, seqlen_k=9, heads_q=4, heads_kv=2, head_dim_qk=128, head_dim_v=128, dtype="bfloat16"
    ),
    "tileops-gqa-bwd": Problem(seqlen_q=9, seqlen_k=9, head_dim_qk=48, head_dim_v=48, dtype="float16"),
    "tileops-mla": Problem(seqlen_q=9, seqlen_k=12, head_dim_qk=192, head_dim_v=128, dtype="float16", causal=True),
    "fastflash-atomic": Problem(seqlen_q=9, seqlen_k=9, head_dim_qk=16, head_dim_v=16, dtype="bfloat16"),
    "jvp-flash-mask": Problem(seqlen_q=32, seqlen_k=32, window_left=3, head_dim_qk=16, head_dim_v=16, dtype="float16"),
    "flash-attention-triton": Problem(
        seqlen_q=9, seqlen_k=5, causal=True, align="top_left", head_dim_qk=16, head_dim_v=16, dtype="float16"
    ),
    "tilelang-file:/somewhere/example_gqa_bwd.py": Problem(
        seqlen_q=65, seqlen_k=65, heads_q=4, heads_kv=1, head_dim_qk=64, head_dim_v=32, dtype="float16"
    ),
}


def write(tmp_path, spec, p, name="case"):
    f = tmp_path / f"{name}.json"
    f.write_text(json.dumps({"kernel": spec, "problem": p.validate().to_dict(), "config": {}}))
    return f


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_generated_script_compiles_and_imports_no_difftest(tmp_path, spec):
    f = write(tmp_path, spec, SPECS[spec])
    assert bug_report.main([str(f), "--out", str(tmp_path), "--name", "r"]) == 0
    script = tmp_path / "r.py"
    py_compile.compile(str(script), doraise=True)
    text = script.read_text()
    assert not re.search(r"^\s*(import|from)\s+difftest", text, re.M) and "difftest." not in text.replace(
        "difftest kernel", ""
    )
    assert (tmp_path / "r.inputs.pt").is_file()
    # committed under results/bugs/, so it must pass the project's own lint (tests/test_lint.py)
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--select",
            "E,W,F,I",
            "--line-length",
            "120",
            str(script),
        ],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout
    import torch

    x = torch.load(tmp_path / "r.inputs.pt")
    p = SPECS[spec]
    assert x["q"].shape == (p.total_q, p.heads_q, p.head_dim_qk) and (x["sink"] is not None) == p.sinks


def test_unknown_kernel_or_bad_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = write(tmp_path, "my-kernel", SPECS["fa3"])
    assert bug_report.main([str(f), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "my-kernel" in err and "allowed" in err and len(err.strip().splitlines()) == 1
    v = write(tmp_path, "fastflash", SPECS["fa4"], name="v")
    assert bug_report.main([str(v), "--out", str(tmp_path)]) == 2
    assert "varlen" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("[1]")
    assert bug_report.main([str(tmp_path / "x.json")]) == 2


@pytest.mark.slow
def test_sdpa_math_script_runs_on_cpu_and_its_verdict_can_fail(tmp_path):
    p = Problem(
        batch=2,
        seqlen_q=9,
        seqlen_k=13,
        heads_q=4,
        heads_kv=2,
        head_dim_qk=16,
        head_dim_v=16,
        dtype="float32",
        causal=True,
        align="bottom_right",
        window_left=3,
    )
    f = write(tmp_path, "sdpa-math", p)
    assert bug_report.main([str(f), "--out", str(tmp_path), "--name", "ok"]) == 0
    run = subprocess.run(
        [sys.executable, str(tmp_path / "ok.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    assert run.returncode == 0, run.stdout + run.stderr
    assert {x["output"] for x in lines[:-1]} == {"o", "dq", "dk", "dv"} and lines[-1]["verdict"] == "ok"
    bad = (tmp_path / "ok.py").read_text().replace('"dk": dk,', '"dk": dk * 1.01,')
    (tmp_path / "bad.py").write_text(bad)
    (tmp_path / "bad.inputs.pt").write_bytes((tmp_path / "ok.inputs.pt").read_bytes())
    run = subprocess.run(
        [sys.executable, str(tmp_path / "bad.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 1 and json.loads(run.stdout.splitlines()[-1])["verdict"] == "MISMATCH", run.stdout
