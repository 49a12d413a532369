"""``difftest report``: a report.json rendered as HTML (difftest/report/html.py)."""

from difftest.argcheck import check_outputs
from difftest.report.html import render_html
from difftest.report.read import load_report
from difftest.safeio import atomic_write_text

HELP = "render a report.json (HTML)"


def add_arguments(p):
    p.add_argument("report", metavar="REPORT.json", help="a report written by `difftest run` (or merge)")
    p.add_argument("--html", required=True, metavar="FILE", help="where the HTML goes")


def command(a) -> int:
    doc = load_report(a.report)  # ReportError: one line, exit 2 (cli.main)
    check_outputs(None, [("--html", a.html)])
    atomic_write_text(a.html, render_html(doc, title=f"difftest report: {a.report}"))
    print(f"html: {a.html}")
    return 0
