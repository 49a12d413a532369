"""A campaign's time split from its report, as the device calls record it: the campaign's
kernel, status, cases, wall time and framework overhead, then each phase's seconds, largest
first, and its compile reuse; the same fields saved as JSON beside the raw report (which the
call then deletes: the cases are not kept). Usage:
``python3 scripts/device/campaign_split.py REPORT.json OUT.json``"""

import json
import sys


def main(report: str, out: str) -> None:
    c = json.load(open(report))["campaigns"][0]
    t = c["timing"]
    with open(out, "w") as f:
        json.dump({k: c.get(k) for k in ("kernel", "status", "examples", "elapsed_s", "timing", "compile_reuse")}, f,
                  indent=1)
    print(c["kernel"], c["status"], c["examples"], "cases", c["elapsed_s"], "s; overhead", round(t["overhead_s"], 1),
          "s =", round(100 * t["overhead_share"], 1), "% of", round(t["wall_s"], 1), "s")
    for name, s in sorted(t["phases_s"].items(), key=lambda kv: -kv[1]):
        print(" ", name, round(s, 2))
    print("compile reuse", json.dumps(c.get("compile_reuse")))


if __name__ == "__main__":
    main(*sys.argv[1:3])
