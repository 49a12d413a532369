"""The documentation stays true: every ```python block of README.md and docs/*.md runs (a
page's blocks in order, in one namespace, in a scratch directory); the README's adapter passes
its own one-line pytest test, and with the bug the README describes it fails with the very
lines the README prints; the quick start's commands exist and its test command is the one
.ci/run runs; every link between the pages resolves; the architecture page names every
module once, the docs index every page, cli.md every subcommand ``difftest --help`` lists, and
the tests' map every test file. results/ is evidence, not the lab notebook: no
one-off script, one dated summary per device session, and a script or log a page names that
has left the tree carries the commit it is at.

A block that genuinely needs a GPU starts with the line ``# needs a GPU`` and is skipped
without CUDA; no other block may be skipped."""

import ast
import re
import shlex
import shutil
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GPU_MARK = "# needs a GPU"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def _blocks(page: Path, lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(page.read_text()) if kind == lang]


def _run_page(page: Path) -> dict:
    ns = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(_blocks(page, "python")):
        if block.startswith(GPU_MARK) and not torch.cuda.is_available():
            continue
        exec(compile(block, f"{page.relative_to(ROOT)} python block {i + 1}", "exec"), ns)
    return ns


def test_every_page_has_been_looked_at():
    assert {p.name for p in PAGES} >= {"README.md", "adapters.md", "architecture.md", "python-api.md"}
    assert sum(len(_blocks(p, "python")) for p in PAGES) >= 5


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p, "python")], ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what a block writes (.difftest/) stays in the scratch directory
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "myattn"))  # docs/adapters.md's worked example
    for block in _blocks(page, "python"):
        ast.parse(block)  # a block that does not parse fails here with its page's name
        first = block.splitlines()[0]
        assert not first.lower().startswith("# skip"), f"{page.name}: only '{GPU_MARK}' may skip a block"
    _run_page(page)


def _readme_failure_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    shown = next(body for kind, body in FENCE.findall(text) if kind == "" and body.startswith("[FAILED]"))
    return shown.splitlines()


def test_readme_adapter_passes_its_own_test_and_fails_as_shown_with_the_bug(difftest_campaign, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = _run_page(ROOT / "README.md")
    ns["test_my_kernel"](difftest_campaign)  # the README's one-line test, as written: passes
    adapter_block = _blocks(ROOT / "README.md", "python")[0]
    correct = "s.logsumexp(-1)\n"
    assert adapter_block.count(correct) == 1
    buggy = {"__name__": "docs_readme_bug"}
    exec(adapter_block.replace(correct, "s.logsumexp(-1) * 1.4426950408889634\n"), buggy)  # log2-based LSE
    res = difftest_campaign(buggy["MyKernel"](), profile="quick", expect_failure=True)
    assert res.failed
    got = res.failure.render().splitlines()
    shown = _readme_failure_lines()
    assert got[:3] == shown[:3], "README's failure text is stale:\n" + "\n".join(got[:3])
    line = f"first failure after {res.examples_to_fail} examples; reproducer: {res.reproducer['py']}"
    hexname = re.compile(r"-[0-9a-f]{12}\.py$")  # the file name's hash differs per run
    run_id = re.compile(r"/runs/[0-9a-f]{32}/")  # and so does the run's id

    def same(text):
        return run_id.sub("/runs/ID/", hexname.sub("-HASH.py", text))

    assert same(shown[3]) == same(line), line


def test_every_example_passes_the_resolved_scale():
    """One spelling: an example hands its kernel ``problem.scale`` (resolved), never
    ``problem.softmax_scale``, which is None unless a custom scale was drawn."""
    examples = [
        (f"{p.relative_to(ROOT)} python block {i + 1}", block)
        for p in PAGES
        for i, block in enumerate(_blocks(p, "python"))
    ]
    examples += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").rglob("*.py"))]
    examples.append(("difftest/commands/scaffold.py", (ROOT / "difftest" / "commands" / "scaffold.py").read_text()))
    raw = [where for where, text in examples if re.search(r"\b(p|problem|inputs\.problem)\.softmax_scale\b", text)]
    assert not raw, f"examples passing the unresolved softmax_scale (use .scale): {raw}"
    assert sum("p.scale" in text for _, text in examples) >= 3


# the functions whose lines the terminal prints after a campaign (run/plan.py's print_campaign
# and the helpers it and the HTML share); their line labels are the terms docs/gates.md defines
PRINTERS = {
    "difftest/run/plan.py": ("print_campaign", "nothing_checked_line"),
    "difftest/report/write.py": (
        "campaign_notes",
        "compile_reuse_line",
        "replay_line",
        "overflow_note",
        "findings_table",
    ),
    "difftest/execute/timing.py": ("render",),
}


def _printed_terms() -> set[str]:
    """The terms the terminal prints: each printed line's label (an f-string's opening words up
    to a colon, a brace or a parenthesis), the summary and findings tables' column names, the
    triage kinds and the campaign statuses."""
    from difftest.report.write import FINDINGS_HEAD, HEAD
    from difftest.vocab import CampaignStatus, TriageKind

    terms = {"(all)", *HEAD, *FINDINGS_HEAD, *map(str, TriageKind), *map(str, CampaignStatus)}
    for path, names in PRINTERS.items():
        for fn in ast.walk(ast.parse((ROOT / path).read_text())):
            if not (isinstance(fn, ast.FunctionDef) and fn.name in names):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                    m = re.match(r"\s*([a-z][a-z -]*?[a-z])\s*(?=[:({]|$)", node.values[0].value)
                    if m:
                        terms.add(m.group(1))
    return terms


def test_every_term_the_terminal_prints_is_defined():
    text = (ROOT / "docs" / "gates.md").read_text()
    assert "## Reading the output" in text, "docs/gates.md has no 'Reading the output' section defining the terms"
    section = text.split("## Reading the output", 1)[1].split("\n## ", 1)[0]
    defined = set()
    for row in re.findall(r"^\| (.+?) \|", section, re.M):
        defined.update(re.findall(r"`([^`]+)`", row))
    terms = _printed_terms()
    assert {"overflow-limited", "worst ratio", "not exercised", "search budget spent"} <= terms
    missing = sorted(terms - defined)
    assert not missing, f"docs/gates.md (Reading the output) defines none of {missing}"


OPENING_MAX_WORDS = 50  # a sentence a newcomer reads in one breath


def test_every_page_opens_plainly():
    """The prose a page opens with (before its first blank line) has no sentence past
    OPENING_MAX_WORDS words: ci-gating.md once opened with three of 62 to 74."""
    long = []
    for page in PAGES:
        body = page.read_text().split("\n", 1)[1].lstrip("\n")
        opening = re.split(r"\n\s*\n", body, maxsplit=1)[0]
        if opening.lstrip().startswith(("|", "```")):
            continue  # a table or a block, not prose
        for sentence in re.split(r"(?<=[.!?:])\s+(?=[A-Z`*\[])", " ".join(opening.split())):
            if len(sentence.split()) > OPENING_MAX_WORDS:
                long.append(f"{page.name}: {len(sentence.split())} words: {sentence[:80]}...")
    assert not long, "pages opening with a long sentence:\n" + "\n".join(long)


def _quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text().split("## Quick start", 1)[1]
    block = next(body for kind, body in FENCE.findall(text) if kind == "bash")
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_quick_start_commands_exist_and_the_test_command_is_what_ci_runs():
    lines = _quick_start()
    assert len(lines) == 2
    for line in lines:
        for command in re.split(r"&&|\|\|", line):
            argv = shlex.split(command)
            assert argv, line
            if argv[0] == "difftest":  # installed by the first half of the same line
                entry = re.search(r'^difftest = "([\w.]+):(\w+)"', (ROOT / "pyproject.toml").read_text(), re.M)
                assert entry, "pyproject.toml has no difftest script"
                module = ROOT / (entry.group(1).replace(".", "/") + ".py")
                assert re.search(rf"^def {entry.group(2)}\(", module.read_text(), re.M), entry.group(0)
            else:
                assert shutil.which(argv[0]), f"{argv[0]} (README quick start) is not on PATH"
    assert lines[0].startswith("pip install -e '.[test]'")
    ci = [
        ln.strip()
        for ln in (ROOT / ".ci" / "run").read_text().splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    assert lines[1] in ci, f"README's test command {lines[1]!r} is not what .ci/run runs"
    assert "pip install -q -e '.[test]'" in " ".join(ci)


# docs/exit-codes.md is written with the exit-code work on another branch; drop it from here
# once both are merged.
LINKED_BEFORE_WRITTEN = {"exit-codes.md", "docs/exit-codes.md"}


def test_links_between_pages_resolve():
    pages = [*PAGES, ROOT / "tests" / "README.md", ROOT / "results" / "README.md"]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target in LINKED_BEFORE_WRITTEN:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_architecture_page_names_every_module_once():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", text, re.M)  # one per module: | `model/problem.py` | holds |
    twice = sorted({r for r in rows if rows.count(r) > 1})
    assert not twice, f"docs/architecture.md has more than one line for {twice}"
    missing = []
    for f in sorted((ROOT / "difftest").rglob("*.py")):
        rel = f.relative_to(ROOT / "difftest")
        if rel.name == "__init__.py" and len(rel.parts) > 1:
            continue  # a subpackage is named by its heading row
        name = str(rel) if len(rel.parts) > 1 else f"difftest/{rel}"
        if name not in rows:
            missing.append(name)
    assert not missing, f"docs/architecture.md has no line for {missing}"


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "README.md" and p.name not in linked]
    assert not missing, f"docs/README.md does not list {missing}"


def _help_subcommands() -> list[str]:
    """The subcommands ``difftest --help`` lists (its usage line's {a,b,...})."""
    from difftest.commands.cli import build_parser

    return re.search(r"\{([\w,-]+)\}", build_parser().format_help()).group(1).split(",")


def test_cli_page_has_an_entry_for_every_subcommand():
    """docs/cli.md's table of commands has a row for each subcommand ``difftest --help`` lists."""
    rows = re.findall(r"^\| `difftest ([\w-]+)` \|", (ROOT / "docs" / "cli.md").read_text(), re.M)
    names = _help_subcommands()
    assert len(names) >= 15
    missing = [n for n in names if n not in rows]
    assert not missing, f"docs/cli.md has no entry for {missing}"
    assert not [r for r in rows if r not in names], f"docs/cli.md lists commands difftest does not have: {rows}"


def test_tests_map_names_every_test_file():
    text = (ROOT / "tests" / "README.md").read_text()
    missing = [f.name for f in sorted((ROOT / "tests").glob("test_*.py")) if f"`{f.name}`" not in text]
    assert not missing, f"tests/README.md does not say where {missing} belong"


# Pointers a reader of the code cannot follow: the project's issue numbers, seed files and notes,
# labels of device runs and phase logs (kept on the branch lab-notebook, not in the product), and
# paths on the machine the code was written on.
OUTSIDE = re.compile(
    r"\bissue \d+|\bseed[ -]?00\d|anchors\.md|\bR\d{2}\b|\bphase ?\d+|results/h200|scripts/device"
    r"|/work/|\.seed/"
)


def test_no_code_points_outside_the_repository():
    hits = []
    for folder in ("difftest", "kernels", "oracles", "strategies", "tests", "examples", "scripts"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            if f == Path(__file__).resolve():
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if OUTSIDE.search(line):
                    hits.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


# results/ is evidence, not the lab notebook (results/README.md, "What results/ holds"): no
# one-off scripts, and a device folder holds one dated summary per session and nothing else.
RESULTS = ROOT / "results"
SCRIPT_SUFFIXES = (".py", ".sh", ".bash")
DEVICE_FOLDERS = ("h200",)  # results/<device>/: one per device that ran sessions
DATED_SUMMARY = re.compile(r"\d{4}-\d{2}-\d{2}(-s\d+)?\.md")


def _is_script(path: Path) -> bool:
    if path.suffix in SCRIPT_SUFFIXES:
        return True
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def test_results_hold_no_one_off_scripts():
    """A bug report's own scripts (results/bugs/<package>/) paste upstream; results/bugs/'s
    tooling stays when a test runs it. Any other script under results/ is a one-off."""
    tests_text = "\n".join(p.read_text() for p in sorted((ROOT / "tests").glob("test_*.py")))
    one_off = []
    for f in sorted(RESULTS.rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts or not _is_script(f):
            continue
        rel = f.relative_to(RESULTS).parts
        if rel[0] == "bugs" and len(rel) == 3:
            continue
        if rel[0] == "bugs" and len(rel) == 2 and f.name in tests_text:
            continue
        one_off.append(str(f.relative_to(ROOT)))
    assert not one_off, f"one-off scripts under results/ (git history keeps them; cite the commit): {one_off}"


def test_a_device_folder_holds_one_dated_summary_per_session():
    for device in DEVICE_FOLDERS:
        folder = RESULTS / device
        others = [p.name for p in sorted(folder.iterdir()) if not (p.is_file() and DATED_SUMMARY.fullmatch(p.name))]
        assert not others, f"results/{device}/ holds more than dated session summaries: {others}"
        for summary in sorted(folder.glob("*.md")):
            text = summary.read_text()
            assert re.search(r"\b(bash|python3?) \S", text), f"{summary.name} does not say what command ran"
            assert re.search(r"\bat commit\s+[0-9a-f]{7,40}\b", text), f"{summary.name} names no commit of its script"


# a path under results/h200/, or a script's, named in a page
NAMED_RESULT = re.compile(r"(?<![\w/.-])results/[\w./{},*-]*[\w*}/]")


def _gone(path: str) -> bool:
    return not (ROOT / path).exists() and not any(ROOT.glob(path)) if "{" not in path else True


def test_a_result_named_but_gone_carries_its_commit():
    """A script or device log a page names under results/ is in the tree, or the page names the
    commit it is at, after one of its mentions (``... at commit abc1234``, or ``git show
    abc1234:results/...``)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.rglob("*.md"))]
    uncited = []
    for page in pages:
        text = page.read_text()
        cited = {}
        for m in NAMED_RESULT.finditer(text):
            path = m.group(0).rstrip(".")
            if not (path.startswith("results/h200/") or path.endswith(SCRIPT_SUFFIXES)) or not _gone(path):
                continue
            after = text[m.end() : m.end() + 120].split("results/", 1)[0]
            cited[path] = cited.get(path, False) or bool(
                re.search(r"\bat commit\s+[0-9a-f]{7,40}\b", after) or re.search(r"[0-9a-f]{7,40}:$", text[: m.start()])
            )
        uncited += [f"{page.relative_to(ROOT)}: {path}" for path, ok in cited.items() if not ok]
    assert not uncited, "named under results/ but gone, with no commit:\n" + "\n".join(uncited)
