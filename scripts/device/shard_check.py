"""Issue 16: one shard on one GPU next to two shards on two GPUs, from their reports.

    python3 scripts/device/shard_check.py ONE.json S0.json S1.json MERGED.json

Prints, per run, cases, campaign seconds, cases per minute and status; the two-shard wall
time is the longer shard's (they ran side by side); the speed-up is cases per minute of the
pair over the single shard; then whether the merged report holds every shard's case exactly
once (problem keys: the same as ``difftest merge`` uses) and no problem is in both shards.
"""

import json
import sys
from collections import Counter

from difftest.report.read import problem_key


def campaign(path):
    r = json.load(open(path))
    (c,) = r["campaigns"]
    return c


def main(one, s0, s1, merged):
    rows = []
    for label, path in (("one shard, GPU0", one), ("shard 0/2, GPU0", s0), ("shard 1/2, GPU1", s1)):
        c = campaign(path)
        rows.append((label, c))
        t = c["elapsed_s"]
        print(f"{label}: {c['status']}, {c['examples']} cases in {t:.1f} s = {60 * c['examples'] / t:.1f} cases/min, "
              f"compile reuse {json.dumps(c.get('compile_reuse'))}, overhead "
              f"{100 * (c.get('timing') or {}).get('overhead_share', float('nan')):.1f}%")
    one_c, a, b = (c for _, c in rows)
    pair_cases, pair_wall = a["examples"] + b["examples"], max(a["elapsed_s"], b["elapsed_s"])
    single = 60 * one_c["examples"] / one_c["elapsed_s"]
    pair = 60 * pair_cases / pair_wall
    print(f"two shards side by side: {pair_cases} cases in {pair_wall:.1f} s = {pair:.1f} cases/min; "
          f"speed-up {pair / single:.2f}x over one shard")
    keys = {i: Counter(problem_key(case["problem"]) for case in c["cases"]) for i, c in ((0, a), (1, b))}
    both = set(keys[0]) & set(keys[1])
    m = campaign(merged)
    mk = Counter(problem_key(case["problem"]) for case in m["cases"])
    union = keys[0] + keys[1]
    print(f"merged: {len(m['cases'])} cases, examples {m['examples']}, distinct problems {len(mk)}, "
          f"duplicates in merged {sum(v - 1 for v in mk.values())}, problems in both shards {len(both)}, "
          f"every shard case present once: {set(mk) == set(union) and max(mk.values(), default=1) == 1}, "
          f"duplicates dropped {(m.get('settings') or {}).get('duplicates_dropped')}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
