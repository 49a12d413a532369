"""Memory layouts on the H200: every GPU kernel on every layout its capability declares.

For each kernel and each declared layout, runs the layout corners of the edge corpus (each
one right after its contiguous twin, as a campaign does) and a few problems of the kernel's
own size range laid out that way, in a worker process (a crash costs one case). A layout
that passes contiguous and fails laid out is a layout finding; one the kernel refuses late
(assertion, launch failure, misaligned address) is a contract violation, since the
capability cites the interface's own checks for accepting it.

    python3 scripts/device/layouts.py --out DIR [KERNEL ...]

Defaults to fa4 fa4-fast fa3 flex flex-gqa sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math.
Writes DIR/layouts.json (one record per case: kernel, layout, problem, status, failed
gates, reason's first line) and prints a kernel x layout table of passed/failed/error.
"""

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from difftest.execute import adapter as registry
from difftest.judge.runner import RunConfig, run_case
from difftest.model.layouts import CONTIGUOUS
from difftest.strategies import edge_problems

KERNELS = ("fa4", "fa4-fast", "fa3", "flex", "flex-gqa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")


def cases_for(kernel) -> list:
    """The edge corpus's layout corners with their contiguous twins first, plus each layout
    on three corpus problems with the largest head dims, batches and head counts."""
    cap = kernel.capability
    edges = edge_problems(cap, "gpu")
    out = []
    for p in edges:
        if p.layout != CONTIGUOUS:
            out += [p.replace(layout=CONTIGUOUS), p]
    contiguous = [p for p in edges if p.layout == CONTIGUOUS and max(p.seqlens_q + p.seqlens_k) <= 512]
    plain = sorted(contiguous, key=lambda p: (-p.head_dim_qk, -p.batch, -p.heads_q))[:3]
    for kind in cap.layouts:
        for p in plain:
            q = p.replace(layout=kind)
            if q.layout.unfit(q) is None and cap.covers(q):
                out.append(q)
    return list(dict.fromkeys(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("kernels", nargs="*", default=list(KERNELS))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = RunConfig(isolate=True, timeout_s=300)
    records, table = [], defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for name in args.kernels:
        kernel = registry.get(name)
        why = kernel.available()
        if why:
            print(f"{name}: unavailable: {why}", file=sys.stderr)
            continue
        for p in cases_for(kernel):
            case = run_case(kernel, p, config)
            reason = (case.reason or "").strip().splitlines()
            records.append({"kernel": name, "layout": p.layout.kind, "problem": p.to_dict(), "status": str(case.status),
                            "failed_gates": [str(g) for g in case.failed_gates], "reason": reason[0] if reason else ""})
            cell = table[name][p.layout.kind]
            cell[{"passed": 0, "failed": 1}.get(str(case.status), 2)] += 1
            print(f"{name:16s} {p.layout.kind:14s} {str(case.status):8s} {p.short()}  "
                  f"{', '.join(map(str, case.failed_gates)) or (reason[0][:100] if reason else '')}", flush=True)
    (out / "layouts.json").write_text(json.dumps(records, indent=1))
    kinds = sorted({k for t in table.values() for k in t})
    print("\nkernel x layout: passed/failed/error")
    print("kernel".ljust(16) + "".join(k[:13].ljust(14) for k in kinds))
    for name, row in table.items():
        print(name.ljust(16) + "".join(("/".join(map(str, row[k])) if k in row else "-").ljust(14) for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
