"""Did two seeded campaigns of one kernel run the same Problems, in the same order? Prints each
kernel's case counts, the Problems they share and the first case where they differ.
``python3 scripts/device/same_draws.py A/report.json B/report.json``"""

import json
import sys


def problems(path: str) -> dict:
    return {c["kernel"]: [json.dumps(x["problem"], sort_keys=True) for x in c.get("cases", [])]
            for c in json.load(open(path))["campaigns"]}


def main(a: str, b: str) -> None:
    pa, pb = problems(a), problems(b)
    for kernel in pa:
        x, y = pa[kernel], pb.get(kernel, [])
        first = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), None)
        print(f"{kernel}: {len(x)} and {len(y)} cases, {len(set(x) & set(y))} Problems shared, "
              f"first difference at case {first if first is not None else 'none'}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
