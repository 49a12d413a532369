"""``difftest merge``: reports (the shards of a campaign) joined into one
(difftest/report/merge.py)."""

from pathlib import Path

from difftest.argcheck import check_outputs
from difftest.report.merge import merge_reports
from difftest.report.read import load_report
from difftest.safeio import atomic_write_text, json_text

HELP = "join reports (the shards of a campaign) into one"


def add_arguments(p):
    p.add_argument("reports", nargs="+", metavar="REPORT.json", help="reports to join (e.g. the shards of a campaign)")
    p.add_argument("-o", "--output", required=True, metavar="M.json", help="where the merged report goes")


def command(a) -> int:
    doc = merge_reports([(p, load_report(p)) for p in a.reports])  # ReportError: one line, exit 2 (cli.main)
    check_outputs(None, [("-o", a.output)])

    atomic_write_text(Path(a.output), json_text(doc, indent=1))  # strict JSON: no Infinity/NaN
    c = doc["campaigns"]
    print(f"merged {len(a.reports)} reports: {len(c)} kernels, {sum(x['examples'] for x in c)} cases -> {a.output}")
    return 0
