"""Render device results (campaigns.py report.json + determinism.json, bench.json) as markdown.

    python3 scripts/device/summarize_campaigns.py DIR [DIR ...]   (each DIR holds report.json etc.)

Campaign rows count cases (distinct Problems run) as edge corpus + the rest (drawn, and
after a failure the shrinker's); a campaign that failed inside the edge corpus ran only
part of it. A narrowed
campaign (``@FIELD=...`` in campaigns.py) shows what it stepped around.
"""

import collections
import json
import sys
from pathlib import Path

OUTS = ("o", "lse", "dq", "dk", "dv", "dsink")


def second_ref_worst(camp):
    worst = {}
    for c in camp["cases"]:
        for v in c.get("verdicts", []):
            if v.get("gate") == "second_reference":
                r = v.get("numbers", {}).get("ratio")
                if r is not None:
                    worst[v["output"]] = max(worst.get(v["output"], 0.0), r)
    return worst


def error_reasons(camp):
    reasons = collections.Counter()
    for c in camp["cases"]:
        if c["status"] == "error":
            reasons[c.get("reason", "").splitlines()[0][:140] if c.get("reason") else "?"] += 1
    return reasons


def main(dirs):
    camps, det, bench = [], [], []
    for d in map(Path, dirs):
        if (d / "report.json").exists():
            camps += json.loads((d / "report.json").read_text())["campaigns"]
        if (d / "determinism.json").exists():
            det += json.loads((d / "determinism.json").read_text())
        if (d / "bench.json").exists():
            bench += json.loads((d / "bench.json").read_text())["rows"]
    out = ["## Campaigns (profile gpu, bounded by examples and seconds)", "",
           "| kernel | status | cases (edge + drawn) | passed | failed | error | skipped | seconds | worst ratio "
           + " | ".join(OUTS) + " | 2nd-ref worst |",
           "|---|---|---|---|---|---|---|---|" + "---|" * len(OUTS) + "---|"]
    for c in camps:
        n = c["counts"]
        edge = c["settings"].get("edge_cases")
        n_all = c["examples"]
        cases = f"{n_all} ({min(n_all, edge)} + {max(0, n_all - edge)})" if edge is not None else f"{n_all}"
        narrowed = c["settings"].get("narrowed")
        name = c["kernel"] + (" narrowed " + ", ".join(f"{k}={v}" for k, v in narrowed.items()) if narrowed else "")
        wr = [f"{c['outputs'][o]['worst_ratio']:.3g}" if o in c["outputs"] else "-" for o in OUTS]
        sr = second_ref_worst(c)
        srs = ", ".join(f"{k} {v:.3g}" for k, v in sr.items()) or "-"
        out.append(f"| {name} | {c['status']} | {cases} | {n['passed']} | {n['failed']} | "
                   f"{n['error']} | {n['skipped']} | {c['elapsed_s']:.0f} | " + " | ".join(wr) + f" | {srs} |")
    for c in camps:
        reasons = error_reasons(c)
        if c.get("failure") or reasons:
            out += ["", f"### {c['kernel']}"]
        if c.get("failure"):
            f = c["failure"]
            gates = [v["output"] + ":" + v["gate"] for v in f.get("verdicts", []) if not v.get("passed")]
            out.append(f"- first failure after {c['examples_to_fail']} examples ({c['seconds_to_fail']:.1f} s); "
                       f"shrunk to `{json.dumps(f['problem'], sort_keys=True)}`; status {f['status']}; "
                       f"failed gates {gates}; reproducer `{(c.get('reproducer') or {}).get('json', '-')}`")
            if f.get("reason"):
                out.append(f"- reason: `{f['reason'].splitlines()[0][:300]}`")
        for r, k in reasons.most_common(5):
            out.append(f"- {k} case(s) with error: `{r}`")
    if det:
        out += ["", "## Determinism (same inputs, N calls, bitwise)", "",
                "| kernel | problem | runs | claims | bitwise equal | differing elements per output |",
                "|---|---|---|---|---|---|"]
        for r in det:
            if "error" in r:
                out.append(f"| {r['kernel']} | {r['problem']} | | | error | {r['error'][:100]} |")
                continue
            diff = ", ".join(f"{o} {v['differing']}" for o, v in r["per_output"].items() if v["differing"]) or "none"
            out.append(f"| {r['kernel']} | {r['problem']} | {r['runs']} | {r['claims_deterministic']} | "
                       f"{r['bitwise_equal']} | {diff} |")
    if bench:
        from difftest.measure.bench import markdown

        out += ["", "## Backward time (median of 20 after 3 warm-up calls)", "", markdown(bench)]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
