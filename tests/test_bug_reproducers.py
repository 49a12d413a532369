"""The reproducer JSONs beside the bug reports in results/bugs/: every one loads the way
``difftest repro`` loads it, names a registered kernel whose capability covers its problem,
documents a failing verdict, is named by its report; the ones whose kernel runs here are
replayed and must still give the documented verdict."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from difftest.execute import adapter
from difftest.model.problem import OUTPUTS
from difftest.search import reproducer

BUGS = Path(__file__).resolve().parent.parent / "results" / "bugs"
# difftest sanitize writes NAME.sanitizer.json sidecars beside the reproducers
JSONS = sorted(p for p in BUGS.glob("*/*.json") if not p.name.endswith(".sanitizer.json"))
REPORTS = sorted(BUGS.glob("*/REPORT-*.md"))
GATE_LABEL = re.compile(rf"^({'|'.join(OUTPUTS)}):[a-z_]+$")


def _builder():
    spec = importlib.util.spec_from_file_location("make_reproducers", BUGS / "make_reproducers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _capability(kernel: str):
    try:
        return adapter.get(kernel).capability
    except adapter.KernelSpecError:  # tilelang-file: the adapter needs the example's file to exist
        from difftest.kernels import tilelang_file

        assert kernel == tilelang_file.PREFIX
        return tilelang_file.CAPABILITY


def _ids(paths):
    return [str(p.relative_to(BUGS)) for p in paths]


def test_every_report_has_a_reproducer():
    """Every report has its minimal problem as a JSON, unless its folder's REPLAY.md says why not."""
    assert len(REPORTS) >= 13
    named = {(p.parent.name, json.loads(p.read_text())["report"]) for p in JSONS}
    missing = [
        str(r.relative_to(BUGS))
        for r in REPORTS
        if (r.parent.name, r.name) not in named
        and f"No reproducer JSON: {r.name}" not in (r.parent / "REPLAY.md").read_text()
    ]
    assert not missing, f"reports without a reproducer JSON: {missing}"


@pytest.mark.parametrize("path", JSONS, ids=_ids(JSONS))
def test_reproducer_loads_and_matches_its_report(path):
    kernel, problem, cfg = reproducer.load(path)  # what `difftest repro` reads, every field checked
    d = json.loads(path.read_text())
    assert kernel in adapter.names(), f"{kernel!r} is not a registered kernel"
    assert not adapter.is_import_spec(kernel)  # replays without --allow-import
    why = _capability(kernel).excludes(problem)
    assert why is None, f"{path.name}: outside {kernel}'s declared capability: {why}"
    # "passed": a design note's problem our gates must keep accepting (a correct design's record)
    assert d["status"] in ("failed", "error") or (d["status"] == "passed" and d["report"].startswith("NOTE-"))
    if d["status"] == "passed":
        assert not d["failed_gates"]
    elif d["status"] == "failed":
        assert d["failed_gates"] and all(GATE_LABEL.match(g) for g in d["failed_gates"]), d["failed_gates"]
    else:
        assert d["reason"] and not d["failed_gates"]
    report = path.parent / d["report"]  # a REPORT-*.md, or the NOTE-*.md of a design note
    assert report.exists(), f"{path.name} names {d['report']}, which is not in {path.parent}"
    assert f"results/bugs/{path.parent.name}/{path.name}" in (path.parent / "REPLAY.md").read_text(), (
        f"{path.parent.name}/REPLAY.md does not say how to replay {path.name}"
    )
    assert d["seen_with"]


def test_reproducers_are_what_the_builder_writes():
    """Each JSON is the report's minimal problem built with difftest's Problem, not hand-edited."""
    built = _builder()
    assert sorted(e.path for e in built.ENTRIES) == JSONS
    for e in built.ENTRIES:
        assert e.path.read_text() == e.text(), f"{e.path} differs from make_reproducers.py's entry"


def _runs_here(path) -> bool:
    kernel = json.loads(path.read_text())["kernel"]
    try:
        k = adapter.get(kernel)
    except adapter.KernelSpecError:
        return False
    return k.capability.device == "cpu" and k.available() is None


CPU = [p for p in JSONS if _runs_here(p)]
ELSEWHERE = [p for p in JSONS if p not in CPU]


def _assert_documented_verdict(path, r):
    d = json.loads(path.read_text())
    assert r.status == d["status"], f"{path.name}: documented {d['status']}, replayed {r.status}: {r.reason[:200]}"
    if d["status"] == "failed":
        missing = set(d["failed_gates"]) - set(r.failed_gates)
        assert not missing, f"{path.name}: documented gates {missing} passed on replay (failed: {r.failed_gates})"


@pytest.mark.parametrize("path", CPU, ids=_ids(CPU))
def test_cpu_reproducer_still_fails_as_documented(path):
    """sdpa-cpu-flash's fp16/bf16 accumulation (a design note, NOTE-input-dtype-accumulation.md): our
    gates accept it since the kernel declares the input-dtype running sum (it failed dv:budget before)."""
    _assert_documented_verdict(path, reproducer.replay(path))


def test_some_reproducer_replays_on_the_cpu():
    assert [p.parent.name for p in CPU] == ["sdpa-cpu-flash"]


GPU = [p for p in ELSEWHERE if json.loads(p.read_text())["kernel"] != "tilelang-file"]


@pytest.mark.parametrize("path", GPU, ids=_ids(GPU))
def test_gpu_reproducer_is_skipped_not_passed_without_its_device(path):
    """Replayed where its kernel cannot run, a reproducer says so (skipped, with the
    reason) and never reads as a pass."""
    k = adapter.get(json.loads(path.read_text())["kernel"])
    if k.available() is None:
        pytest.skip(f"{k.name} runs here: test_gpu_reproducer_fails_as_documented replays it")
    r = reproducer.replay(path)
    assert r.status == "skipped" and r.reason.startswith("unavailable:"), (r.status, r.reason)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", GPU, ids=_ids(GPU))
def test_gpu_reproducer_fails_as_documented(path):
    """On the GPU machine with the package installed: the documented verdict (a fixed
    release passes here: then the report and its JSON say since which version)."""
    k = adapter.get(json.loads(path.read_text())["kernel"])
    if k.available() is not None:
        pytest.skip(f"{k.name}: {k.available()}")
    _assert_documented_verdict(path, reproducer.replay(path))
