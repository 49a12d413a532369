"""Statuses are compared as vocab enums, never as string literals: a misspelt literal is a
check that is never true, while a misspelt enum member fails at import. Scans difftest/
with ast for a comparison of something named *status* with a literal that is a status."""

import ast
from pathlib import Path

from difftest.vocab import CampaignStatus, RunStatus, Status

ROOT = Path(__file__).resolve().parents[1]
WORDS = {str(m) for e in (Status, CampaignStatus, RunStatus) for m in e}
# a vocabulary of its own: a timing row of `difftest bench` is "ok", "skipped" or "error"
OWN_WORDS = {"difftest/measure/bench.py"}


def _literals(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [x for e in node.elts for x in _literals(e)]
    return []


def test_no_status_compared_with_a_string_literal():
    found = []
    for path in sorted((ROOT / "difftest").rglob("*.py")):
        if str(path.relative_to(ROOT)) in OWN_WORDS:
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            # ast.unparse, not get_source_segment: that splits the whole file into lines on every
            # call, once per comparison side (seconds over difftest/)
            if not any("status" in ast.unparse(s).lower() for s in sides):
                continue
            words = [w for s in sides for w in _literals(s) if w in WORDS]
            if words:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.get_source_segment(text, node)}")
    assert not found, "statuses compared with string literals (use difftest.vocab):\n" + "\n".join(found)
