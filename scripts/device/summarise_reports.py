"""One block per campaign of a difftest report.json: cases, wall, pair coverage, findings with their
signatures (and the first failing case's message), unexplained failing cases. Used by the device calls of
2026-12-07 (session 3) to bring back a short text beside the packed reports."""

import json
import sys


def main(path: str, label: str) -> None:
    try:
        doc = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"== {label}: no report ({e})")
        return
    for c in doc.get("campaigns", []):
        pairs = (c.get("coverage") or {}).get("pairs") or {}
        fs = c.get("findings") or []
        rates = c.get("rates") or {}
        print(
            f"== {label} {c.get('kernel')}: {c.get('status')} {c.get('reason', '')[:160]};"
            f" {len(c.get('cases', []))} cases,"
            f" {c.get('elapsed_s')} s, pairs {pairs.get('covered')}/{pairs.get('claimed')} (explained"
            f" {pairs.get('explained')}), compile keys {c.get('compile_keys')}, {len(fs)} findings, unexplained"
            f" {c.get('unexplained')}, explained_skipped {c.get('explained_skipped')},"
            f" rate {rates.get('cases_per_hour')}/h"
        )
        for f in fs:
            sig = f.get("signature") or {}
            print(
                f"  - {f.get('id', '')[:10]} {f.get('status')} hits {f.get('hits')} skipped {f.get('skipped')}: "
                f"{(sig.get('describe') or '')[:260]}"
            )
            best = f.get("failure") or {}
            if best:
                print(f"      {best.get('status')} {best.get('error_type', '')} {str(best.get('reason', ''))[:200]}")
        for line in (c.get("unexplained_cases") or [])[:6]:
            print(f"  ? {str(line)[:240]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
