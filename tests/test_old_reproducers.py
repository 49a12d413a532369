"""Reproducers outlive the engine's layout. tests/data/reproducer-33ddc2c.json was written by
difftest at 33ddc2c, before the engine moved into subpackages (mutant:dk-missing-scale on a
float32 GQA problem; its config lists every output's k, a default there meaning "not set").
It replays today with the same verdict and the same k. A kernel named as a top-level
"kernels.x:Y" path (how ``-k kernels.blockwise:BlockwiseAttention`` was recorded before
kernels/ installed as difftest.kernels) still resolves. A generated .py imports only the
public API (``from difftest import ...``) and runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

from difftest.execute.adapter import current_module
from difftest.search.reproducer import replay, write_reproducer

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "tests" / "data" / "reproducer-33ddc2c.json"


def test_a_reproducer_written_before_the_move_replays_with_its_verdict_and_k():
    recorded = json.loads(OLD.read_text())
    r = replay(OLD)
    assert r.failed and r.failed_gates == recorded["failed_gates"] == ["dk:budget"], r.render()
    then = {(v["output"], v["gate"]): v["numbers"].get("k") for v in recorded["verdicts"] if v["gate"] == "budget"}
    now = {(v.output, v.gate): v.numbers.get("k") for v in r.verdicts if v.gate == "budget"}
    assert now == then


def test_a_top_level_kernels_path_from_before_the_install_move_resolves(tmp_path):
    assert current_module("kernels.blockwise") == "difftest.kernels.blockwise"
    assert current_module("mypkg.kernels") == "mypkg.kernels"
    d = json.loads(OLD.read_text())
    d["kernel"] = "kernels.blockwise:BlockwiseAttention"
    path = tmp_path / "old-path.json"
    path.write_text(json.dumps(d))
    r = replay(path, allow_import=True)  # the correct blockwise kernel: passes
    assert not r.failed and r.kernel == "torch-blockwise", r.render()


def test_a_generated_script_imports_only_the_public_api_and_runs(tmp_path):
    from difftest.judge.runner import RunConfig, run_case
    from difftest.model.problem import Problem
    from tests.kernels_for_tests import WrongDkForLongGqa

    p = Problem(seqlen_q=4, seqlen_k=40, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8, dtype="float32")
    case = run_case(WrongDkForLongGqa(), p)
    assert case.failed
    paths = write_reproducer(WrongDkForLongGqa(), case, RunConfig(), tmp_path)
    text = Path(paths["py"]).read_text()
    imports = [ln.strip() for ln in text.splitlines() if "import" in ln and "difftest" in ln]
    assert imports and all(ln.startswith("from difftest import ") for ln in imports), imports
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    r = subprocess.run(
        [sys.executable, paths["py"]], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert r.returncode == 1 and "dk: budget FAILED" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
