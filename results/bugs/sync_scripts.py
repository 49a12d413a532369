#!/usr/bin/env python
"""Copy each report's script into the report: the ```python block of every REPORT-*.md (and DRAFT-*.md)
becomes the text of the file its "Script: `repro_*.py`" line names (beside it), so the upstream text pastes
as one piece.

    python results/bugs/sync_scripts.py            # rewrite the blocks
    python results/bugs/sync_scripts.py --check    # exit 1 if a block differs from its file

tests/test_bug_reports.py checks the same (and the length and vocabulary rules)."""
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = re.compile(r"^Script: `(repro_[a-z0-9_]+\.py)`", re.MULTILINE)
BLOCK = re.compile(r"^```python\n.*?^```$", re.MULTILINE | re.DOTALL)


def synced(report: Path) -> str:
    text = report.read_text()
    m = SCRIPT.search(text)
    if not m or not BLOCK.search(text):
        raise SystemExit(f"{report}: needs a 'Script: `repro_*.py`' line and a ```python block")
    code = (report.parent / m.group(1)).read_text()
    return BLOCK.sub(lambda _: f"```python\n{code}```", text, count=1)


def main(argv) -> int:
    stale = []
    for report in sorted([*HERE.glob("*/REPORT-*.md"), *HERE.glob("*/DRAFT-*.md")]):
        text = synced(report)
        if text != report.read_text():
            stale.append(str(report.relative_to(HERE)))
            if "--check" not in argv:
                report.write_text(text)
    if stale:
        print(("stale: " if "--check" in argv else "rewrote: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
