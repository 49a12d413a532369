"""The bug reports in results/bugs/ as a package maintainer reads them, and as our own gates read them.

1. Consistency with our verdicts: no report documents a failure our own gates would pass. Each reproducer
   JSON records what the package returned (``witness``, written by make_reproducers.py); here that value
   goes into an output that is otherwise the float64 truth (the kindest output consistent with the report),
   and difftest's judge (``check_outputs`` with the truth and yardsticks computed on the CPU) must fail the
   documented output. A report withdrawn because the gates accept its output (make_reproducers.WITHDRAWN)
   must be accepted. The CPU-replayable JSONs are replayed for real in test_bug_reproducers.py.
   Every report has such a JSON, or NO_REPRODUCER says why our judge cannot see its failure.
2. The upstream text stands alone: every REPORT-*.md (and DRAFT-*.md) has the header lines and sections
   below, at most REPORT_MAX_LINES lines outside its script, none of our vocabulary, and its script inline,
   identical to the file beside it, at most SCRIPT_MAX_LINES lines, importing no difftest; the difftest
   replay lives in the folder's REPLAY.md; README.md lists every report with its status; retest_gpu.sh runs
   every report's script; sync_scripts.py copies a changed script into its report.
3. Retests are recorded: each report's "- Retested:" line gives the date, card and versions and what the
   script did, or says it was not retested; a DRAFT-*.md (a report not yet confirmed by its script) says
   UNCONFIRMED at the top, and a REPORT-*.md does not.
"""

import ast
import importlib.util
import math
import re
from pathlib import Path

import pytest
import torch

from difftest.execute import adapter
from difftest.judge.gates import GateConfig, check_outputs, used_rows
from difftest.model.inputs import make_inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import FP8_DTYPES

BUGS = Path(__file__).resolve().parent.parent / "results" / "bugs"
REPORTS = sorted(BUGS.glob("*/REPORT-*.md"))
NOTES = sorted(BUGS.glob("*/NOTE-*.md"))
DRAFTS = sorted(BUGS.glob("*/DRAFT-*.md"))
REPORT_MAX_LINES = 80  # the text outside the inline script
SCRIPT_MAX_LINES = 66  # "about 60": the two cuDNN graph scripts need a few more
HEADER = ("- Package:", "- Environment:", "- Retested:", "- First bad release:", "- Already reported:")
SECTIONS = ("## What happens", "## Reproduce", "## Expected vs got", "## Where")
# our words: a maintainer should meet none of them
BANNED = re.compile(
    r"(?<![/.\w])(difftest|campaigns?|gates?|budgets?|findings?|yardsticks?|adapters?|surveys?|shrunk|"
    r"k_needed|reproducer json|call [A-Z]\d*|phase \d+)(?![/.\w])",  # not inside a path
    re.IGNORECASE,
)
STATUSES = ("ready", "known-upstream", "fixed-upstream")
# the header item only (its continuation lines are indented): a date, then what the script did
RETESTED = re.compile(
    r"^- Retested: (not\b|20\d\d-\d\d-\d\d, (?:[^\n]|\n  )*?(still fails|fixed|exits [01]))", re.MULTILINE
)
# reports whose failure difftest's judge does not see (no reproducer JSON), and why
NO_REPRODUCER = {
    "cudnn/REPORT-fp8-bwd-amax-short-seq.md": "the judge checks O, LSE and gradients; amax outputs are not judged",
    # promoted 2026-12-07 from drafts (H100 run); packages without an adapter: a JSON needs one first
    "adasplash/REPORT-bwd-preprocess-oob.md": "no adapter; and a write past delta leaves every output right",
    "adasplash/REPORT-gqa-v1-path.md": "no adasplash adapter yet",
    "chill-attention/REPORT-wheel-no-code.md": "a packaging bug: the wheel has no code, so no output to judge",
    "ebt-flash/REPORT-additive-mask-ln2.md": "no ebt-flash adapter yet",
    "ebt-flash/REPORT-head-dim-16.md": "no ebt-flash adapter yet (a compile error, no output)",
    "flash-attn-triton/REPORT-import-triton34.md": "an import error: nothing runs, no output to judge",
    "flash-attn-triton/REPORT-noncausal-padded-keys.md": "no flash-attn-triton adapter yet",
    "flash-attn-triton/REPORT-seqlen-k-ne-q.md": "no flash-attn-triton adapter yet",
    "flash-sparse-attn/REPORT-lse-descriptor-align.md": "no flash-sparse-attn adapter yet (a CUDA error, no output)",
    "flash-sparse-attn/REPORT-seqused-k-backward.md": "no flash-sparse-attn adapter yet",
    # promoted 2026-12-07 (session 3, H100)
    "flash-sparse-attn/REPORT-kernel-cache-seqlen1.md": "no adapter; and it takes two calls in one process",
    "ebt-flash/REPORT-noncausal-tail-keys.md": "no ebt-flash adapter yet",
    "jvp-flash/REPORT-head-dim-16.md": "a compile error, no output to judge",
    "jvp-flash/REPORT-mask-large-logits.md": "not made: recording one needs the jvp-flash-mask adapter on a GPU",
    "fla/REPORT-nsa-csr-oob.md": "stray CSR pairs leave O/dQ/dK/dV right; the suspected write gives no stable verdict",
    "fla/REPORT-nsa-empty-seq.md": "not made: recording one needs the fla-nsa adapter on a GPU (fla/REPLAY.md)",
}
SCRIPT_LINE = re.compile(r"^Script: `(repro_[a-z0-9_]+\.py)`", re.MULTILINE)


def _ids(paths):
    return [str(p.relative_to(BUGS)) for p in paths]


def _builder():
    spec = importlib.util.spec_from_file_location("make_reproducers", BUGS / "make_reproducers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _split(text: str) -> tuple[list[str], str | None]:
    """(the report's lines outside its ```python block, the block's text)."""
    m = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    if not m:
        return text.splitlines(), None
    return (text[: m.start()] + text[m.end() :]).splitlines(), m.group(1)


# ------------------------------------------------------------------ 2. the upstream text
@pytest.mark.parametrize("path", REPORTS + DRAFTS, ids=_ids(REPORTS + DRAFTS))
def test_report_stands_alone(path):
    text = path.read_text()
    prose, block = _split(text)
    assert len(prose) <= REPORT_MAX_LINES, (
        f"{path.name}: {len(prose)} lines outside the script (allowed {REPORT_MAX_LINES})"
    )
    assert prose[0].startswith("# "), f"{path.name}: the first line is the title"
    for h in HEADER:
        assert any(line.startswith(h) for line in prose[:18]), f"{path.name}: no '{h}' line in the header"
    for s in SECTIONS:
        assert s in prose, f"{path.name}: no '{s}' section"
    bad = sorted({m.group(0) for m in BANNED.finditer(text)})
    assert not bad, f"{path.name} uses our vocabulary: {bad}"
    assert "results/" not in text, f"{path.name} cites our results/ folder"
    m = SCRIPT_LINE.search(text)
    assert m and block is not None, f"{path.name}: 'Script: `repro_*.py`' and the script inline in a ```python block"
    script = path.parent / m.group(1)
    assert script.exists(), f"{path.name} names {script.name}, which is not beside it"
    assert script.read_text() == block, f"{path.name}: the inline script differs from {script.name}"


def _scripts(reports):
    return sorted(
        {p.parent / SCRIPT_LINE.search(p.read_text()).group(1) for p in reports if SCRIPT_LINE.search(p.read_text())}
    )


SCRIPTS = _scripts(REPORTS)


@pytest.mark.parametrize("path", REPORTS + DRAFTS, ids=_ids(REPORTS + DRAFTS))
def test_retest_is_recorded_and_drafts_say_so(path):
    text = path.read_text()
    assert RETESTED.search(text), (
        f"{path.name}: '- Retested:' needs 'not ...' or 'YYYY-MM-DD, <card, versions>: still fails / fixed / exits N'"
    )
    top = "\n".join(text.splitlines()[:6])
    if path.name.startswith("DRAFT-"):
        assert "UNCONFIRMED" in top, f"{path.name}: a draft says UNCONFIRMED at the top"
    else:
        assert "UNCONFIRMED" not in text, f"{path.name}: an unconfirmed report is a DRAFT-*.md"


@pytest.mark.parametrize("path", _scripts(REPORTS + DRAFTS), ids=_ids(_scripts(REPORTS + DRAFTS)))
def test_script_is_short_and_standalone(path):
    text = path.read_text()
    n = len(text.splitlines())
    assert n <= SCRIPT_MAX_LINES, f"{path.name}: {n} lines (allowed {SCRIPT_MAX_LINES})"
    tree = ast.parse(text)
    mods = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    mods |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "difftest" not in mods and "difftest" not in text.lower(), f"{path.name} depends on difftest"


def test_every_report_and_note_is_listed_with_its_status():
    readme = (BUGS / "README.md").read_text()
    rows = dict(
        re.findall(
            r"^\| \[([a-z0-9-]+/(?:REPORT|NOTE|DRAFT)-[a-z0-9-]+\.md)\]\([^)]*\) \|.*\| ([a-z-]+) \|$",
            readme,
            re.MULTILINE,
        )
    )
    for p in REPORTS:
        key = str(p.relative_to(BUGS))
        assert rows.get(key) in STATUSES, f"README.md lists {key} with status {rows.get(key)!r}: allowed {STATUSES}"
    for p in NOTES:
        key = str(p.relative_to(BUGS))
        assert rows.get(key) in ("withdrawn", "note"), f"README.md lists {key} as {rows.get(key)!r}"
    for p in DRAFTS:
        key = str(p.relative_to(BUGS))
        assert rows.get(key) == "draft", f"README.md lists {key} as {rows.get(key)!r}: allowed 'draft'"


def test_every_reproducer_is_replayed_beside_its_report():
    """The difftest replay of each JSON is in its folder's REPLAY.md, not in the upstream text."""
    for p in sorted(BUGS.glob("*/*.json")):
        if p.name.endswith(".sanitizer.json"):
            continue
        replay = p.parent / "REPLAY.md"
        assert replay.exists() and f"results/bugs/{p.parent.name}/{p.name}" in replay.read_text(), (
            f"{p.parent.name}/REPLAY.md does not say how to replay {p.name}"
        )


def test_the_gpu_retest_runs_every_script():
    driver = (BUGS / "retest_gpu.sh").read_text()
    missing = [str(s.relative_to(BUGS)) for s in SCRIPTS if str(s.relative_to(BUGS)) not in driver]
    assert not missing, f"retest_gpu.sh does not run {missing}"
    # one verdict line per report: two reports sharing a script each get a run (with an argument that picks
    # the issue), so "still fails" never stands for a script that fails on the other report's issue
    alone = [str(r.relative_to(BUGS))[:-3] for r in REPORTS]
    missing = [k for k in alone if not re.search(rf"^\s*run {re.escape(k)} ", driver, re.MULTILINE)]
    assert not missing, f"retest_gpu.sh has no 'run <report> ...' line of its own for {missing}"


def test_sync_scripts_finds_a_stale_block_and_rewrites_it(tmp_path):
    """results/bugs/sync_scripts.py, run on a copy of the reports: --check passes on the tree as it
    is, and after a script changes it says which report is stale, then rewrites its block."""
    import shutil
    import subprocess
    import sys

    for report in REPORTS:
        (tmp_path / report.parent.name).mkdir(exist_ok=True)
        shutil.copy(report, tmp_path / report.parent.name)
        script = SCRIPT_LINE.search(report.read_text()).group(1)
        shutil.copy(report.parent / script, tmp_path / report.parent.name)
    tool = shutil.copy(BUGS / "sync_scripts.py", tmp_path)

    def sync(*args):
        return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, timeout=60)

    assert sync("--check").returncode == 0
    report = tmp_path / REPORTS[0].parent.name / REPORTS[0].name
    script = report.parent / SCRIPT_LINE.search(report.read_text()).group(1)
    script.write_text(script.read_text() + "# changed\n")
    stale = sync("--check")
    assert stale.returncode == 1 and REPORTS[0].name in stale.stdout
    assert sync().returncode == 0 and "# changed\n```" in report.read_text()
    assert sync("--check").returncode == 0


# ------------------------------------------------------------------ 1. consistency with our gates
BUILT = _builder()


def _cpu_replayed(entry) -> bool:
    try:
        k = adapter.get(entry.kernel)
    except adapter.KernelSpecError:
        return False
    return k.capability.device == "cpu" and k.available() is None


def _capability(kernel):
    try:
        return adapter.get(kernel).capability
    except adapter.KernelSpecError:  # tilelang-file needs the example's path
        from difftest.kernels import tilelang_file

        return tilelang_file.CAPABILITY


GPU_FAILED = [e for e in BUILT.ENTRIES if e.status == "failed" and not _cpu_replayed(e)]


def _value(v) -> float:
    return float(v) if not isinstance(v, str) else {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]


class Judged:
    """One entry's problem on the CPU: inputs, truth and yardsticks, and the judge for an output that
    is the truth everywhere except where a witness says what the package returned."""

    def __init__(self, entry):
        from difftest import oracles

        self.entry, self.problem = entry, entry.problem
        self.inputs = make_inputs(self.problem, "cpu")
        self.refs = oracles.references(self.inputs)
        self.cap = _capability(entry.kernel)

    def got(self) -> Outputs:
        dt = getattr(torch, self.problem.dtype)
        out = Outputs()
        for name in self.cap.outputs:
            t = self.refs.truth.get(name)
            if t is not None:
                setattr(out, name, t.clone().to(torch.float32 if name in ("lse", "dsink") else dt))
        return out

    def apply(self, got: Outputs, w: dict) -> None:
        name = w["output"]
        t, truth = got.get(name), self.refs.truth.get(name)
        if "got" in w:
            if w.get("at") is None:
                t.fill_(_value(w["got"]))
            else:
                t[tuple(w["at"])] = _value(w["got"])
            return
        if "err" in w:
            err = w["err"]
        elif "err_rel_max_truth" in w:
            err = w["err_rel_max_truth"] * truth.abs().max().item()
        else:  # err_rel_plain: over the same-dtype yardstick's error
            same = self.refs.yardsticks[0].get(name)
            err = w["err_rel_plain"] * (same.double() - truth.double()).abs().max().item()
        i = int(truth.double().abs().reshape(-1).argmax())
        t.reshape(-1)[i] = float(truth.reshape(-1)[i]) + math.copysign(err, -float(truth.reshape(-1)[i]) or 1.0)

    def verdicts(self, got: Outputs):
        refs = self.refs
        v = check_outputs(
            self.problem,
            got,
            refs.truth,
            refs.yardsticks,
            GateConfig(),
            expected=self.cap.outputs,
            yardstick=refs.flash,
            inputs=self.inputs,
        )
        if refs.more is not None and any(not x.passed for x in v):  # the further designs, as the runner does
            v = check_outputs(
                self.problem,
                got,
                refs.truth,
                refs.yardsticks + refs.more(),
                GateConfig(),
                expected=self.cap.outputs,
                yardstick=refs.flash,
                inputs=self.inputs,
            )
        return v


def _check_truth(j: Judged, w: dict) -> None:
    """The report's true value, where it gives one, is the truth computed here: the same inputs."""
    truth = j.refs.truth.get(w["output"]).double()
    if "truth" in w and w.get("at") is not None:
        assert float(truth[tuple(w["at"])]) == pytest.approx(w["truth"], rel=2e-3, abs=2e-3), w
    if "max_abs_truth" in w:
        assert truth.abs().max().item() == pytest.approx(w["max_abs_truth"], rel=1e-3), w


def test_every_report_has_a_reproducer_our_judge_can_fail():
    """The gate check below covers every report: each REPORT-*.md has a reproducer JSON entry (failed, or
    error for a call that raises), unless NO_REPRODUCER says why the judge cannot see its failure."""
    covered = {f"{e.folder}/{e.report}" for e in BUILT.ENTRIES if e.status in ("failed", "error")}
    missing = [k for k in _ids(REPORTS) if k not in covered and k not in NO_REPRODUCER]
    assert not missing, f"no reproducer JSON (make_reproducers.ENTRIES) and no NO_REPRODUCER reason: {missing}"
    stale = [k for k in NO_REPRODUCER if k in covered or not (BUGS / k).exists()]
    assert not stale, f"NO_REPRODUCER names reports that have a JSON or no longer exist: {stale}"


@pytest.mark.parametrize("entry", GPU_FAILED, ids=[f"{e.folder}/{e.name}" for e in GPU_FAILED])
def test_documented_failure_fails_our_gates(entry):
    """What the report says the package returned fails difftest's gates today, output by output."""
    assert entry.witness, f"{entry.name}: a GPU report's JSON records what the package returned (witness)"
    j = Judged(entry)
    for w in entry.witness:
        _check_truth(j, w)
        if "runs_differ" in w:  # two runs that differ fail the determinism of a kernel that claims it
            assert adapter.get(entry.kernel).capability.deterministic and w["runs_differ"] > 0
            continue
        got = j.got()
        j.apply(got, w)
        failed = {x.output for x in j.verdicts(got) if not x.passed}
        assert w["output"] in failed, f"{entry.name}: {w} passes our gates"
        if w.get("at") is None and "got" in w:  # "anywhere": every element is refused, not only some
            v = next(x for x in j.verdicts(got) if x.output == w["output"] and x.gate == "nonfinite")
            assert v.numbers["mismatched"] == got.get(w["output"])[: used_rows(entry.problem, w["output"])].numel()


def test_the_kindest_output_passes():
    """The witness check is not trivially failing: the truth itself, in the output dtypes, passes."""
    for entry in (e for e in GPU_FAILED if e.problem.dtype not in FP8_DTYPES):
        j = Judged(entry)
        bad = [x.label for x in j.verdicts(j.got()) if not x.passed]
        assert not bad, f"{entry.name}: the truth itself fails {bad}"


@pytest.mark.parametrize("entry", BUILT.WITHDRAWN, ids=[f"{e.folder}/{e.name}" for e in BUILT.WITHDRAWN])
def test_withdrawn_report_is_what_our_gates_accept(entry):
    assert (BUGS / entry.folder / entry.report).exists() and not entry.path.exists()
    j = Judged(entry)
    got = j.got()
    for w in entry.witness:
        _check_truth(j, w)
        j.apply(got, w)
    bad = [x.label for x in j.verdicts(got) if not x.passed]
    assert not bad, f"{entry.name}: withdrawn, but our gates fail it: {bad}"
