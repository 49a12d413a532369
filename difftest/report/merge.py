"""``difftest merge A.json B.json ... -o M.json``: join reports into one.

The reports of the N shards of a campaign (``difftest run --shard I/N``) become one
campaign per kernel: the cases of every shard (a Problem run by two shards is kept once
and counted under ``settings.duplicates_dropped``), counts and per-output numbers
recomputed from the cases, coverage hits summed and a feature missing only when every
shard missed it, the first shard's failure as the failure (every shard's under
``failures``), and the findings of every shard, each distinct bug once (signature.py's
``same_identity``; the cases that hit it summed, the earliest shard's first sighting
kept). Reports of different kernels (one GPU per kernel) are simply put side by side.
Refused, in one line: the same kernel twice without shards, shards of one kernel run with
different settings (seed, profile, gates, narrowing, examples), a shard given twice, or a
shard missing.
"""

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from difftest.report.checked import checked_status
from difftest.report.read import Report, ReportError, signed_findings
from difftest.report.write import output_stats, rates
from difftest.search.signature import (
    UNEXPLAINED_LISTED,
    Signature,
    SignatureError,
    cheapest_absorption,
    fold,
    merged,
    one_bug,
    unexplained_gates,
)
from difftest.vocab import CampaignStatus

if TYPE_CHECKING:  # annotations only: `difftest --help` builds this command's parser, which loads no torch
    from difftest.model.problem import Problem
    from difftest.search.result import CampaignResult

# settings that count what each shard did: summed over the shards (FA4 b25's merged nightly said "searched 10",
# its first shard's, of 891 cases)
COUNTED = (
    "edge_cases",
    "replayed_failures",
    "searched",
    "hunt_attempts",
    "widened",
    "steered",
    "fresh_checks",
    "history_dependent",
)
# settings that must agree between the shards of one campaign
_SAME = ("max_examples", "time_budget_s", "shrink_budget_s", "seed", "config", "spec", "narrowed")


def merged_pairs(records) -> dict:
    """Shards' configuration pair coverage as one: a pair is missing only when every shard
    missed it; the claimed pairs are each shard's (one capability and profile)."""
    parts = [c.coverage.get("pairs") for c in records]
    parts = [p for p in parts if p]
    if not parts:
        return {}
    missing = set(parts[0].get("missing") or ())
    for p in parts[1:]:
        missing &= set(p.get("missing") or ())
    by = {}
    for name, (_, n) in (parts[0].get("by_dimensions") or {}).items():
        by[name] = [n, n]
    for m in missing:
        name = " x ".join(x.split("=", 1)[0] for x in m.split(" x "))
        if name in by:
            by[name][0] -= 1
    claimed = parts[0].get("claimed", 0)
    return {
        **parts[0],
        "covered": claimed - len(missing),
        "missing": sorted(missing),
        "by_dimensions": by,
        "explained": min(p.get("explained", 0) for p in parts),
    }


def _shard(c: "CampaignResult"):
    text = c.settings.get("shard")
    if not text:
        return None
    i, _, n = str(text).partition("/")
    return int(i), int(n)


def merge_campaigns(kernel: str, parts: list) -> dict:
    """``parts``: [(source path, CampaignResult)] of one kernel -> the merged campaign record."""
    shards = [_shard(c) for _, c in parts]
    if len(parts) > 1:
        if None in shards:
            srcs = ", ".join(str(p) for p, c in parts)
            raise ReportError(
                f"kernel {kernel!r} appears in {srcs} without --shard: allowed once per kernel, or once per shard I/N"
            )
        ns = {n for _, n in shards}
        if len(ns) > 1:
            raise ReportError(f"kernel {kernel!r}: shards of different counts {sorted(ns)}: allowed one N")
        n = ns.pop()
        idx = sorted(i for i, _ in shards)
        if len(set(idx)) != len(idx):
            dup = sorted({i for i in idx if idx.count(i) > 1})
            raise ReportError(f"kernel {kernel!r}: shard {dup[0]}/{n} given twice: allowed each shard once")
        if idx != list(range(n)):
            missing = [f"{i}/{n}" for i in range(n) if i not in idx]
            raise ReportError(f"kernel {kernel!r}: shard(s) {', '.join(missing)} missing: merge needs all {n}")
        first = parts[0][1].settings
        for src, c in parts[1:]:
            s = c.settings
            for k in _SAME:
                if s.get(k) != first.get(k):
                    raise ReportError(
                        f"kernel {kernel!r}: {src} was run with {k}={s.get(k)!r}, "
                        f"{parts[0][0]} with {first.get(k)!r}: allowed shards of one campaign"
                    )
            if c.profile != parts[0][1].profile:
                raise ReportError(
                    f"kernel {kernel!r}: {src} ran profile {c.profile!r}, {parts[0][0]} "
                    f"{parts[0][1].profile!r}: allowed shards of one campaign"
                )
    elif shards[0] is not None and shards[0][1] > 1:
        i, n = shards[0]
        missing = [f"{j}/{n}" for j in range(n) if j != i]
        raise ReportError(
            f"kernel {kernel!r}: only shard {i}/{n} given, shard(s) {', '.join(missing)} missing: merge needs all {n}"
        )
    order = sorted(range(len(parts)), key=lambda j: shards[j] or (0, 1))
    parts = [parts[j] for j in order]
    cases, seen, dropped = [], set(), 0
    for _, c in parts:
        for case in c.cases:
            if case.problem in seen:
                dropped += 1
                continue
            seen.add(case.problem)
            cases.append(case)
    recs = [c for _, c in parts]
    available = [c for c in recs if c.status != CampaignStatus.UNAVAILABLE]
    failed = any(c.status == CampaignStatus.FAILED for c in recs)
    status = CampaignStatus.UNAVAILABLE if not available else CampaignStatus.FAILED if failed else CampaignStatus.PASSED
    status = checked_status(status, cases)  # shards that judged no case between them: nothing checked
    failing = [c for c in recs if c.failure]
    hit, missing, beyond = {}, None, []
    for c in available:
        cov = c.coverage
        beyond = beyond or list(cov.get("beyond_profile") or ())  # the profile's, the same in every shard
        for f, n in (cov.get("hit") or {}).items():
            hit[f] = hit.get(f, 0) + n
        m = set(cov.get("missing") or ())
        missing = m if missing is None else missing & m
    compile_stats = {}
    for c in recs:
        for k, v in (c.compile_stats or {}).items():
            if isinstance(v, (int, float)):
                compile_stats[k] = compile_stats.get(k, 0) + v
    settings = dict(recs[0].settings)
    settings.update(
        shard=None,
        shards=len(parts) if shards[0] is not None else None,
        duplicates_dropped=dropped,
        merged_from=[str(p) for p, _ in parts],
    )
    for name in COUNTED:  # each shard's count, summed (not the first shard's alone)
        got = [c.settings.get(name) for c in recs]
        if any(isinstance(n, int) for n in got):
            settings[name] = sum(n for n in got if isinstance(n, int) and not isinstance(n, bool))
    return {
        "kernel": kernel,
        "profile": recs[0].profile,
        "status": status,
        "reason": "; ".join(dict.fromkeys(c.reason for c in recs if c.reason)),
        "examples": len(cases),
        "counts": {s: sum(1 for c in cases if c.status == s) for s in ("passed", "failed", "error", "skipped")},
        "elapsed_s": max(c.elapsed for c in recs),  # shards run side by side: the longest
        "elapsed_s_total": round(sum(c.elapsed for c in recs), 3),
        "examples_to_fail": failing[0].examples_to_fail if failing else None,
        "seconds_to_fail": failing[0].seconds_to_fail if failing else None,
        "unrun": sum(c.unrun for c in recs),
        "compile_keys": sum(c.compile_keys for c in recs),
        "compile_stats": compile_stats or None,
        "coverage": {
            "hit": dict(sorted(hit.items())),
            "missing": sorted(missing or ()),
            **({"beyond_profile": beyond} if beyond else {}),
            **({"pairs": pairs} if (pairs := merged_pairs(available)) else {}),
        },
        "outputs": output_stats(cases),
        "failure": failing[0].failure.to_dict() if failing else None,
        "reproducer": failing[0].reproducer if failing else None,
        "failures": [
            {"shard": c.settings.get("shard"), "failure": c.failure.to_dict(), "reproducer": c.reproducer}
            for c in failing
        ],
        "hunt": any(c.hunt for c in recs),
        "explained_skipped": sum(c.explained_skipped for c in recs),
        "findings": (findings := merge_findings(recs)),
        **unexplained_after_merge(findings, cases),
        "rates": rates(len(cases), findings, max(c.elapsed for c in recs)),  # side by side: the longest wall
        "settings": settings,
        "cases": [case.to_dict() for case in cases],
    }


def unexplained_after_merge(findings: list, cases: list) -> dict:
    """{"unexplained", "unexplained_cases"}: the failing cases no merged finding explains, a
    kernel error met outside a finding's needs first absorbed by it (``signature.absorbed``: the
    record's signature widens). Each shard hunts alone, so a case one shard left unexplained
    when its budget ran out may be another shard's finding (FA4's nightly shards on the H100
    left 25-172 a beta, counted as the shards' sum)."""

    def sigs_of(rec):
        out = []
        for i, d in enumerate([rec.get("signature"), *(rec.get("variants") or ())]):
            try:
                out.append((i, Signature.from_dict(d)))
            except SignatureError:
                continue
        return out

    parsed = [sigs_of(rec) for rec in findings]  # read once; an absorption updates its entry

    def all_sigs():
        return [sig for sigs in parsed for _, sig in sigs]

    count, lines = 0, []
    for n, c in enumerate(cases):
        if not c.failed or not unexplained_gates(all_sigs(), c):
            continue
        alike = [
            (j, i, sig)
            for j, rec in enumerate(findings if c.error_type else ())
            if rec.get("status") != "known"
            for i, sig in parsed[j]
            if sig.fails_alike(c)
        ]
        got = cheapest_absorption(alike, c.problem)
        if got is not None:
            j, i, wider = got
            rec = findings[j]
            if i == 0:
                rec["signature"] = wider.to_dict()
            else:
                rec["variants"] = [*rec["variants"]]  # the shard's own list stays as it was read
                rec["variants"][i - 1] = wider.to_dict()
            rec["absorbed"] = rec.get("absorbed", 0) + 1
            parsed[j] = [(k, wider if k == i else sig) for k, sig in parsed[j]]
        if unexplained_gates(all_sigs(), c):
            count += 1
            if len(lines) < UNEXPLAINED_LISTED:
                lines.append(f"case {n + 1}: {c.problem.short()} ({c.error_type or ', '.join(c.failed_gates)})")
    return {"unexplained": count, "unexplained_cases": lines}


def merge_findings(recs: list) -> list:
    """The shards' findings, each bug once (``signature.fold``): a finding whose signature is
    one already kept adds its cases and skips to it (and its shard to ``shards``), and a kept
    finding whose rule a merge widened takes in every other it now calls its bug, whatever the
    order the shards came in (cuDNN 9.19 on the H100, 2026-12-07: one shard kept dQ and dK/dV of
    one head-dim family apart, no gate in common; the other shard's dQ finding held dV too;
    merged, the dQ finding took that one in but stayed beside the dK/dV one)."""
    found = [
        _Kept({**rec, "shards": [c.settings.get("shard")]}, sig, prob)
        for c in recs
        for rec, sig, prob in signed_findings(c)
    ]
    return [k.rec for k in fold(found, _same, _joined)]


@dataclass
class _Kept:
    """One finding of the merge: its record, its rule, its shrunk Problem, and whether its rule is
    a join's (then its record's signature is no shard's own)."""

    rec: dict
    sig: Signature
    problem: "Problem | None"
    joined: bool = False


def _same(a: _Kept, b: _Kept) -> bool:
    return one_bug(a.sig, b.sig, a.problem, b.problem)


def _joined(k: _Kept, other: _Kept) -> _Kept:
    """``k`` with ``other``'s cases, skips and shards added, its rule the smallest covering both."""
    rec = other.rec
    for n in ("hits", "search_hits", "skipped"):
        if isinstance(rec.get(n), int) and isinstance(k.rec.get(n), int):
            k.rec[n] += rec[n]
    k.rec["shards"].extend(rec.get("shards", ()))
    both = merged(k.sig, other.sig)  # the smallest rule covering what each shard saw
    # each shard's own rules stay as variants (the merged rule alone lost them: cuDNN's merged nightly on the
    # H100, 2026-12-07, showed one variant of the seven signatures it had joined, their head dims gone)
    own = [] if k.joined else [k.rec.get("signature")]
    theirs = [] if other.joined else [rec.get("signature")]
    kept, variants = {both.id}, []
    for d in [*own, *(k.rec.get("variants") or ()), *theirs, *(rec.get("variants") or ())]:
        if isinstance(d, dict) and d.get("id") not in kept:
            kept.add(d.get("id"))
            variants.append(d)
    k.rec["signature"] = both.to_dict()
    k.rec["variants"] = variants
    return _Kept(k.rec, both, k.problem, joined=True)


def merge_reports(docs: list) -> dict:
    """``docs``: [(path, Report or its document)] -> one report document."""
    if not docs:
        raise ReportError("merge: no reports given: allowed one or more report.json files")
    docs = [(path, doc if isinstance(doc, Report) else Report.from_dict(doc, str(path))) for path, doc in docs]
    by_kernel: dict = {}
    for path, doc in docs:
        for c in doc.campaigns:
            by_kernel.setdefault(c.kernel, []).append((path, c))
    first = docs[0][1].header
    out = {k: first.get(k) for k in ("difftest_report", "host", "python", "torch", "cuda")}
    out["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["merged_from"] = [str(p) for p, _ in docs]
    out["campaigns"] = [merge_campaigns(k, parts) for k, parts in by_kernel.items()]
    return out
