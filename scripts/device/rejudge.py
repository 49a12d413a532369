"""Re-run the failing and erroring cases of campaign reports with the current engine:
after a framework fix, this shows on the same machine that each of those cases now
passes (or still fails) under the fixed gates.

    python3 scripts/device/rejudge.py --out DIR REPORT.json[.xz] [...]

Each case runs with its campaign's recorded RunConfig (second reference included).
Writes DIR/rejudge.json (one row per case: kernel, problem, before, after, failed gates).
"""

import argparse
import json
import lzma
import sys
from pathlib import Path

from difftest.execute import adapter as registry
from difftest.execute.isolation import close_all
from difftest.judge.runner import RunConfig, run_case
from difftest.model.problem import Problem


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args(argv)
    rows = []
    for path in a.reports:
        text = lzma.open(path, "rt").read() if path.endswith(".xz") else Path(path).read_text()
        for camp in json.loads(text)["campaigns"]:
            k = registry.get(camp["settings"].get("spec") or camp["kernel"])
            config = RunConfig.from_dict(camp["settings"]["config"])
            for c in camp["cases"]:
                if c["status"] not in ("failed", "error"):
                    continue
                r = run_case(k, Problem.from_dict(c["problem"]), config)
                rows.append({"report": path, "kernel": k.name, "problem": c["problem"], "before": c["status"],
                             "before_gates": c.get("failed_gates", []), "after": r.status,
                             "after_gates": r.failed_gates, "worst_ratio": r.worst_ratio, "notes": r.notes})
                print(f"{k.name:14s} {c['status']:>6s} -> {r.status:6s} {r.failed_gates} "
                      f"{Problem.from_dict(c['problem']).short()}", flush=True)
    close_all()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rejudge.json").write_text(json.dumps(rows, indent=1, default=str))
    n_bad = sum(r["after"] != "passed" for r in rows)
    print(f"{len(rows) - n_bad}/{len(rows)} re-run cases pass")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
