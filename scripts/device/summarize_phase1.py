"""Render phase-1 JSON rows (scripts/device/phase1.py) as a markdown table."""
import json
import sys


def table(rows):
    out = ["| kernel | case | in capability | result | max err / same-dtype err (o, lse, dq, dk, dv, dsink) | runner |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        cap = "no (probe)" if r.get("probe") else "yes"
        if r["status"] != "ok":
            err = r.get("error", "")[:110].replace("|", "/")
            out.append(f"| {r['kernel']} | {r['case']} | {cap} | error | {err} | |")
            continue
        errs = []
        for n in ("o", "lse", "dq", "dk", "dv", "dsink"):
            e = r["errors"].get(n)
            if e:
                nf = "" if e["nonfinite_ok"] else " NaN/Inf mismatch"
                errs.append(f"{n} {e['err']:.1e} (x{e['ratio']:.2g}){nf}")
        rn = r.get("runner") or {}
        runner = rn.get("status", "")
        if rn.get("failed_gates"):
            runner += " " + ",".join(rn["failed_gates"])
        out.append(f"| {r['kernel']} | {r['case']} ({r['problem']}) | {cap} | ok | {'; '.join(errs)} | {runner} |")
    return "\n".join(out)


if __name__ == "__main__":
    rows = []
    for f in sys.argv[1:]:
        rows += json.load(open(f))
    print(table(rows))
