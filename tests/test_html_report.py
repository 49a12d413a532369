"""The HTML report, rendered by headless Chromium: the page shows the numbers the JSON
report holds (read back from the rendered DOM), the histogram draws the failing output's
bar past the limit in red, and the file is one static page (no script, nothing fetched).
Chromium is Debian's package (.ci/run installs it); without it the rendering test is
skipped with that reason and the static checks still run."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from difftest.report.html import render_html
from difftest.report.read import load_report, written_report
from difftest.report.write import write_json
from difftest.search.campaign import run_campaign
from tests.kernels_for_tests import RefKernel, WrongDkForLongGqa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SIZE = (1280, 2000)


class _Keys(HTMLParser):
    """data-k attribute -> the element's text."""

    def __init__(self):
        super().__init__()
        self.keys, self._open = {}, []

    def handle_starttag(self, tag, attrs):
        k = dict(attrs).get("data-k")
        self._open.append(k)
        if k:
            self.keys[k] = ""

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        for k in self._open:
            if k:
                self.keys[k] += data


def _keys(text: str) -> dict:
    p = _Keys()
    p.feed(text)
    return {k: v.strip() for k, v in p.keys.items()}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    results = [
        run_campaign(
            k, "quick", max_examples=20, edge_cases=edge, database=None, out_dir=tmp, seed=1, shrink_budget=5.0
        )
        for k, edge in ((RefKernel(), False), (WrongDkForLongGqa(), True))
    ]
    path = write_json(results, tmp / "report.json")
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "report", str(path), "--html", str(tmp / "r.html")],
        cwd=tmp,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return tmp, json.loads(path.read_text()), (tmp / "r.html").read_text()


def _expected(doc) -> dict:
    out = {}
    for c in doc["campaigns"]:
        k = c["kernel"]
        out[f"{k}/status"] = c["status"]
        out[f"{k}/cases"] = str(len(c["cases"]))
        out[f"{k}/failed"] = str(c["counts"]["failed"])
        out[f"{k}/features_hit"] = str(len(c["coverage"]["hit"]))
        out[f"{k}/failing_cases"] = str(c["counts"]["failed"] + c["counts"]["error"])
        for o, s in c["outputs"].items():
            out[f"{k}/{o}/cases"] = str(s["cases"])
            out[f"{k}/{o}/failed"] = str(s["failed"])
            out[f"{k}/{o}/worst"] = f"{s['worst_ratio']:.3g}"
    return out


def test_static_page_holds_the_key_numbers(report):
    _, doc, html = report
    low = html.lower()
    assert not any(x in low for x in ("<script", " src=", 'href="http', "@import", "url(", "<link"))
    assert html.count("<svg") == 2  # one error-ratio plot per kernel
    keys = _keys(html)
    for k, v in _expected(doc).items():
        assert keys.get(k) == v, (k, keys.get(k), v)
    bad = doc["campaigns"][1]
    assert bad["status"] == "failed" and keys["test-dk-long-gqa/dk/failed"] != "0"
    assert bad["reproducer"]["py"] in html  # the failure's reproducer is on the page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium; .ci/run does)")
def test_chromium_renders_the_report(report):
    from PIL import Image

    tmp, doc, _ = report
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'chromium-profile'}",
    ]
    url = (tmp / "r.html").as_uri()
    shot = tmp / "shot.png"
    r = subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", f"--window-size={SIZE[0]},{SIZE[1]}", url],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    keys = _keys(dom.stdout)  # the numbers as the browser parsed the page
    for k, v in _expected(doc).items():
        assert keys.get(k) == v, (k, keys.get(k), v)
    img = Image.open(shot).convert("RGB")
    assert img.size == SIZE
    colours = img.getcolors(maxcolors=1 << 20)
    counts = {rgb: n for n, rgb in colours}

    def near(target, tol=24):
        return sum(n for rgb, n in counts.items() if all(abs(a - b) <= tol for a, b in zip(rgb, target)))

    assert near((9, 105, 218)) > 200  # histogram bars within the limit (blue)
    assert near((207, 34, 46)) > 100  # the failing dK bar past the limit, the limit line, "failed" (red)
    assert counts.get((255, 255, 255), 0) < 0.97 * SIZE[0] * SIZE[1]  # not a blank page


def test_report_command_refuses_bad_input_in_one_line(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "cut.json").write_text('{"difftest_report": 1, "campaigns": [{"kern')
    for src in ("missing.json", "list.json", "cut.json", "."):
        r = subprocess.run(
            [sys.executable, "-m", "difftest", "report", src, "--html", "out.html"],
            cwd=tmp_path,
            env=dict(os.environ, PYTHONPATH=ROOT),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and src in r.stderr, (src, r.stderr)
    assert not (tmp_path / "out.html").exists()


# ---------------------------------------------------------------- the terminal's hints and numbers, in the HTML
def _crafted_campaign():
    """A campaign of two real cases, edited to carry every hint the terminal prints under a
    campaign: a failure with a declaration problem, overflow-limited elements, a ratio past
    the cap (1.38e6, finite), unexplained cases, unrun problems, a claim beyond the profile,
    compile reuse and a time split."""
    from difftest import Problem
    from difftest.judge.runner import run_case
    from difftest.search.result import CampaignResult
    from difftest.vocab import Gate, Status

    k = RefKernel()
    p = Problem(batch=1, seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8).validate()
    ok, bad = run_case(k, p), run_case(k, p.replace(seqlen_k=6).validate())
    assert ok.status == bad.status == Status.PASSED
    next(v for v in ok.verdicts if v.output == "dk" and v.gate == Gate.BUDGET).numbers["overflow_limited"] = 3
    worst = next(v for v in bad.verdicts if v.output == "dq" and v.gate == Gate.BUDGET)
    worst.numbers["ratio"], worst.passed, worst.message = 1.38e6, False, "dq: budget FAILED (crafted)"
    bad.status = Status.FAILED
    r = CampaignResult(
        kernel=k.name,
        profile="quick",
        status="failed",
        cases=[ok, bad],
        failure=bad,
        examples_to_fail=2,
        seconds_to_fail=0.5,
        unrun=7,
        reproducer={"json": "repro/x.json", "py": "repro/x.py"},
        coverage={"hit": {"dense": 2}, "missing": [], "beyond_profile": ["head dim 512"]},
        compile_reuse={"reusing": 1, "cases": 2, "fraction": 0.5, "configurations": 1},
        timing={
            "wall_s": 2.0,
            "phases_s": {"kernel": 1.0, "truth": 0.5},
            "share": {"kernel": 0.5, "truth": 0.25},
            "overhead_s": 0.5,
            "overhead_share": 0.25,
        },
        declaration=[
            "declaration problem? the case passes without seqlen_q_ne_k (left at its "
            "default, True): declare seqlen_q_ne_k=False; if the kernel does serve it, "
            "this is a kernel bug"
        ],
        unexplained_cases=["case 2: dq:budget (a larger --max-findings or --time-budget shrinks it)"],
    )
    return k, r


def _table(text: str) -> list[dict]:
    """The terminal's summary table as rows of {column: cell}, cut where the dashes are."""
    lines = text.splitlines()
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[1])]
    head = [lines[0][a : b + 2].strip() for a, b in spans]
    return [
        dict(
            zip(
                head,
                (line[a : (spans[i + 1][0] if i + 1 < len(spans) else None)].strip() for i, (a, _) in enumerate(spans)),
            )
        )
        for line in lines[2:]
    ]


def _page_text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_html_carries_every_hint_and_number_the_terminal_prints(capsys):
    from difftest.report.html import render_html
    from difftest.report.write import campaign_record, summary_table
    from difftest.run.plan import print_campaign

    k, r = _crafted_campaign()
    print_campaign(k, r)
    table = summary_table([r])
    terminal = capsys.readouterr().out
    page = render_html({"campaigns": [campaign_record(r)]})
    text, keys = _page_text(page), _keys(page)
    marks = (
        "declaration problem",
        "search budget spent",
        "unexplained failing",
        "claimed but beyond profile",
        "compile reuse",
        "time split",
        "framework overhead",
        "shrunk reproducer",
    )
    hints = [line.strip() for line in terminal.splitlines() if any(m in line for m in marks)]
    hints = [h[h.index("shrunk reproducer") :] if "shrunk reproducer" in h else h for h in hints]
    assert len(hints) >= len(marks)
    for hint in hints:
        assert " ".join(hint.split()) in text, f"the HTML lacks the terminal's line: {hint}"
    rows = _table(table)
    for row in rows:
        if row["output"] == "(all)":
            assert keys[f"{k.name}/worst"] == row["worst ratio"]
            assert keys[f"{k.name}/triage"] == row["triage"]
        else:
            assert keys[f"{k.name}/{row['output']}/worst"] == row["worst ratio"], row
            assert not row["triage"] or row["triage"] in text, row
    assert {row["worst ratio"] for row in rows if row["output"] in ("(all)", "dq")} == {"1e+06"}
    assert "overflow-limited 3 elems" in text


def test_the_all_row_is_never_below_one_of_its_outputs():
    """The "(all)" row sums up its outputs: its worst ratio is their largest at least (a finite
    1.38e6 on dQ once printed 1.38e+06 under an "(all)" of 1e+06)."""
    from difftest.report.write import _rows

    _, r = _crafted_campaign()
    rows = _rows([r])
    whole = next(row for row in rows if row[1] == "(all)")
    outputs = [row for row in rows if row[1] != "(all)"]
    assert outputs and all(whole[6] >= row[6] for row in outputs), [(row[1], row[6]) for row in rows]


def test_the_run_renders_its_page_from_the_text_it_wrote_as_from_the_file(report, tmp_path):
    """``difftest run`` renders report.html from the report's text in memory
    (``written_report``): the same page as the file read back, non-finite numbers included."""
    tmp, doc, _ = report
    doc = json.loads(json.dumps(doc))
    case = doc["campaigns"][0]["cases"][0]
    case["worst_ratio"] = "inf"  # as safeio.finite_json writes it
    floats = [(i, k) for i, v in enumerate(case["verdicts"]) for k, x in v["numbers"].items() if isinstance(x, float)]
    i, key = floats[0]
    case["verdicts"][i]["numbers"][key] = "nan"
    text = json.dumps(doc, indent=1)
    path = tmp_path / "report.json"
    path.write_text(text)
    assert render_html(written_report(text)) == render_html(load_report(path))
    got = written_report(text).campaigns[0].cases[0].verdicts[i].numbers[key]
    assert got != got  # a float NaN again, as load_report gives it
