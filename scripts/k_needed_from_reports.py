"""Largest k_needed per kernel, dtype and output over the PASSING cases of saved campaign
reports (report.json or report.json.xz), for calibrating the budget's k from device runs
(results/calibration.md). Usage: python scripts/k_needed_from_reports.py REPORT... [--kernel K ...]"""

import argparse
import collections
import json
import lzma
import sys


def load(path: str) -> dict:
    raw = lzma.open(path).read() if path.endswith(".xz") else open(path, "rb").read()
    return json.loads(raw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--kernel", action="append", help="only these kernels (repeatable)")
    a = ap.parse_args(argv)
    rows = collections.defaultdict(list)
    for path in a.reports:
        for camp in load(path).get("campaigns", []):
            for c in camp.get("cases", []):
                if c["status"] != "passed" or (a.kernel and c["kernel"] not in a.kernel):
                    continue
                for v in c["verdicts"]:
                    if v["gate"] == "budget":
                        rows[(c["kernel"], c["problem"]["dtype"], v["output"])].append(v["numbers"]["k_needed"])
    print(f"{'kernel':16} {'dtype':9} {'output':6} {'cases':>5} {'max k_needed':>12}")
    per_dtype = collections.defaultdict(float)
    for (k, dt, out), xs in sorted(rows.items()):
        print(f"{k:16} {dt:9} {out:6} {len(xs):5d} {max(xs):12.3g}")
        per_dtype[(dt, out)] = max(per_dtype[(dt, out)], max(xs))
    print("\nper dtype and output (max over kernels):")
    for (dt, out), m in sorted(per_dtype.items()):
        print(f"{dt:9} {out:6} {m:8.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
