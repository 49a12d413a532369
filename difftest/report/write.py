"""Reports: the JSON report (one record per case with the numbers), a terminal summary
table per kernel x output, the findings (one row per distinct bug: signature, cases that
hit it, when first seen, reproducer), a findings file, and a markdown summary (the
campaign's JSON-lines stream of cases is difftest/search/case_log.py)."""

import json
import math
import platform
import time
from pathlib import Path

from difftest.judge import triage
from difftest.model.problem import OUTPUTS
from difftest.printable import cell
from difftest.safeio import atomic_write_text, json_text
from difftest.vocab import DEVICE_MEMORY_SKIP, RATIO_CAP, RATIO_GATES, CampaignStatus, Gate, Status


def capped(r) -> float:
    """A budget ratio as every report keeps it: at most ``RATIO_CAP``, which also stands for a
    non-finite ratio (and for a number a hand-edited report spells as no number); a case's
    ``worst_ratio`` caps the same way."""
    try:
        r = float(r)
    except (TypeError, ValueError):
        return RATIO_CAP
    return min(r, RATIO_CAP) if math.isfinite(r) else RATIO_CAP


def ratio(v) -> float:
    """A verdict's error ratio, capped (0 where it has none)."""
    return capped(v.numbers.get("ratio", 0.0))


def ratio_text(r: float) -> str:
    """A ratio as the terminal, summary.md, the gate's table and the HTML all print it: three
    significant digits, the cap as ``1e+06`` (docs/gates.md, "Reading the output")."""
    return f"{capped(float(r)):.3g}"


def output_stats(cases) -> dict:
    """Per output: cases checked, passed, failed, worst budget ratio (capped), over CaseResults
    (a live campaign's, or a report's read back: report.read)."""
    stats = {}
    for c in cases:
        if c.status == Status.SKIPPED:
            continue
        for name in OUTPUTS:
            vs = [v for v in c.verdicts if v.output == name]
            if not vs:
                continue
            s = stats.setdefault(name, {"cases": 0, "passed": 0, "failed": 0, "worst_ratio": 0.0})
            s["cases"] += 1
            if all(v.passed for v in vs):
                s["passed"] += 1
            else:
                s["failed"] += 1
            s["worst_ratio"] = max(s["worst_ratio"], max((ratio(v) for v in vs if v.gate == Gate.BUDGET), default=0.0))
    return stats


def rates(cases: int, findings: list, wall_s: float) -> dict:
    """Cases and new (not known) findings per hour of the campaign's wall time: what a nightly
    buys for its GPU-hour (shards side by side on one GPU: their longest wall)."""
    new = sum(1 for f in findings if (f.get("status") == "new" if isinstance(f, dict) else not f.known))
    hours = wall_s / 3600 if wall_s > 0 else 0.0
    return {
        "wall_s": round(wall_s, 3),
        "cases_per_hour": round(cases / hours) if hours else 0,
        "new_findings": new,
        "new_findings_per_hour": round(new / hours, 1) if hours else 0.0,
    }


def rate_line(r: dict) -> str:
    return (
        f"rate: {r['cases_per_hour']:,} cases/h, {r['new_findings']} new findings in {r['wall_s']:.0f} s "
        f"({r['new_findings_per_hour']:g} per hour)"
    )


def campaign_record(res) -> dict:
    counts = {s: sum(1 for c in res.cases if c.status == s) for s in Status}
    return {
        "kernel": res.kernel,
        "profile": res.profile,
        "status": res.status,
        "reason": res.reason,
        "examples": len(res.cases),
        "counts": counts,
        "elapsed_s": round(res.elapsed, 3),
        "examples_to_fail": res.examples_to_fail,
        "seconds_to_fail": res.seconds_to_fail,
        "unrun": getattr(res, "unrun", 0),
        "compile_keys": res.compile_keys,
        "compile_stats": res.compile_stats,
        "coverage": res.coverage,
        "outputs": output_stats(res.cases),
        "triage": triage.summarize(res.cases),
        "declaration": getattr(res, "declaration", []),
        "timing": getattr(res, "timing", None),
        "compile_reuse": getattr(res, "compile_reuse", None),
        "failure": res.failure.to_dict() if res.failure else None,
        "reproducer": res.reproducer,
        "hunt": getattr(res, "hunt", False),
        "findings": finding_records(res),
        "explained_skipped": getattr(res, "explained_skipped", 0),
        "unexplained": getattr(res, "unexplained", 0),
        "unexplained_cases": list(getattr(res, "unexplained_cases", None) or ()),
        "rates": rates(len(res.cases), getattr(res, "findings", None) or [], res.elapsed),
        "settings": res.settings,
        "cases": [c.to_dict() for c in res.cases],
    }


def pair_line(pairs: dict, least: int = 4) -> str:
    """One line of a campaign's pair coverage: covered of claimed, how many a finding
    explains, and the dimension pairs least covered."""
    claimed, covered = pairs.get("claimed", 0), pairs.get("covered", 0)
    text = f"{covered}/{claimed} pairs covered ({100 * covered / max(1, claimed):.0f}%)"
    if pairs.get("explained"):
        text += f", {pairs['explained']} more explained by findings"
    short = sorted(((c / max(1, n), k, c, n) for k, (c, n) in (pairs.get("by_dimensions") or {}).items() if c < n))
    if short:
        text += "; least covered: " + ", ".join(f"{k} {c}/{n}" for _, k, c, n in short[:least])
    return text


def finding_records(res) -> list[dict]:
    """The campaign's findings as records (a result rebuilt from a record holds them so)."""
    return [f if isinstance(f, dict) else f.to_dict() for f in getattr(res, "findings", None) or ()]


def write_findings(results, path) -> Path:
    """findings.json: every campaign's findings (what ``--known`` reads back)."""
    doc = {
        "difftest_findings": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "campaigns": [
            {"kernel": r.kernel, "settings": {"spec": (r.settings or {}).get("spec")}, "findings": finding_records(r)}
            for r in results
        ],
    }
    return atomic_write_text(Path(path), json.dumps(doc, indent=1, default=str))


def _finding_rows(results) -> list[tuple]:
    rows = []
    for r in results:
        for f in finding_records(r):
            sig = f.get("signature") or {}
            seen = f.get("first_seen") or {}
            first = f"case {seen['case']} ({seen.get('seconds', 0):.1f} s)" if seen.get("case") else "not hit"
            repro = (f.get("reproducer") or {}).get("json") or (
                "replayed, not shrunk" if f.get("status") == "known" else "-"
            )
            rows.append(
                (
                    r.kernel,
                    f.get("id", ""),
                    f.get("status", ""),
                    str(f.get("hits", 0)),
                    str(f.get("skipped", 0)),
                    first,
                    sig.get("describe", ""),
                    str(repro),
                )
            )
    return rows


FINDINGS_HEAD = ("kernel", "finding", "status", "cases", "skipped", "first seen", "signature", "reproducer")


def findings_table(results) -> str:
    """One row per distinct finding of every campaign ('' when there is none)."""
    rows = _finding_rows(results)
    if not rows:
        return ""
    notes = [
        f"{r.kernel}: {r.explained_skipped} drawn problems not run (a finding explains them)"
        for r in results
        if getattr(r, "explained_skipped", 0)
    ]
    notes += [
        f"{r.kernel}: {r.unexplained} failing cases no finding explains (findings cap or budget reached)"
        for r in results
        if getattr(r, "unexplained", 0)
    ]
    return text_table([FINDINGS_HEAD] + rows) + "".join("\n" + n for n in notes)


def write_json(results, path, extra: dict | None = None, records: dict | None = None) -> Path:
    """report.json of ``results``; ``records``: campaign_record(r) already made, by id(r)."""
    return atomic_write_text(Path(path), report_text(results, extra, records))


def report_text(results, extra: dict | None = None, records: dict | None = None) -> str:
    """The text ``write_json`` writes (``difftest run`` keeps it to render the HTML page)."""
    # lazy: keeps torch off --help
    import torch

    doc = {
        "difftest_report": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "campaigns": [(records or {}).get(id(r)) or campaign_record(r) for r in results],
    }
    if extra:
        doc.update(extra)
    return json_text(doc, indent=1)  # strict JSON: no Infinity/NaN


def overflow_note(limited: dict, output: str) -> str:
    """An output's triage cell: its elements accepted at the dtype's limits (docs/gates.md)."""
    return f"overflow-limited {limited[output]} elems" if limited.get(output) else ""


def _rows(results):
    """Per campaign an "(all)" row, then one per output. The "(all)" row's worst ratio is the
    largest of its outputs' and its cases' (an error case counts as the cap): never below a
    row it sums up."""
    rows = []
    for r in results:
        counts = {s: sum(1 for c in r.cases if c.status == s) for s in Status}
        summary = triage.summarize(r.cases)
        stats = output_stats(r.cases)
        worst = max(
            [s["worst_ratio"] for s in stats.values()]
            + [capped(c.worst_ratio) for c in r.cases if c.status != Status.SKIPPED],
            default=0.0,
        )
        rows.append(
            (
                r.kernel,
                "(all)",
                len(r.cases),
                counts["passed"],
                counts["failed"] + counts["error"],
                counts["skipped"],
                worst,
                r.status,
                triage.describe(summary),
            )
        )
        for name, s in stats.items():
            rows.append(
                (
                    r.kernel,
                    name,
                    s["cases"],
                    s["passed"],
                    s["failed"],
                    0,
                    s["worst_ratio"],
                    "",
                    overflow_note(summary["overflow_limited"], name),
                )
            )
    return rows


def memory_skipped(cases) -> int:
    """Cases skipped because the GPU's memory ran out twice (judge/device_memory.py)."""
    return sum(1 for c in cases if c.status == Status.SKIPPED and (c.reason or "").startswith(DEVICE_MEMORY_SKIP))


def campaign_notes(profile: str, coverage: dict, unexplained_cases, unrun: int, cases=()) -> list[str]:
    """The hints under a campaign's block, in the terminal and in the HTML report alike: what
    the capability claims beyond the profile, the failing cases no finding explains, the
    drawn problems the budget left unrun, the cases the GPU's memory could not hold."""
    out = []
    short = memory_skipped(cases)
    if short:
        out.append(
            f"{short} cases not judged: the device's memory ran out twice (other processes on the GPU, or a "
            "leak); their reasons say whose tensors; run fewer campaigns side by side"
        )
    if (coverage or {}).get("beyond_profile"):
        out.append(f"claimed but beyond profile {profile}: {'; '.join(coverage['beyond_profile'])}")
    out += [f"unexplained failing {line}" for line in unexplained_cases or ()]
    if unrun:
        out.append(f"search budget spent: {unrun} drawn problems not run (a larger --time-budget runs them)")
    return out


def compile_reuse_line(cr: dict) -> str:
    return (
        f"compile reuse: {cr['reusing']}/{cr['cases']} cases ({100 * cr['fraction']:.0f}%) reused one "
        f"of {cr['configurations']} compiled configurations"
    )


def replay_line(reproducer: dict) -> str:
    """How to replay a shrunk failure: its JSON through difftest, its script alone."""
    return (
        f"shrunk reproducer: {reproducer.get('json')} (replay: difftest repro FILE; "
        f"standalone: python {reproducer.get('py')})"
    )


HEAD = ("kernel", "output", "cases", "passed", "failed", "skipped", "worst ratio", "verdict", "triage")


def summary_table(results) -> str:
    return text_table(
        [HEAD]
        + [(k, o, str(n), str(p), str(f), str(s), ratio_text(w), v, t) for k, o, n, p, f, s, w, v, t in _rows(results)]
    )


def text_table(rows) -> str:
    """Left-aligned columns of strings, the first row a header underlined with dashes; every
    cell printable (``printable.cell``: a kernel name from a report cannot reach a terminal
    or a CI log as an escape sequence or a workflow command)."""
    rows = [[cell(x) for x in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(x.ljust(widths[i]) for i, x in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_summary(results) -> str:
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for k, o, n, p, f, s, w, v, t in _rows(results):
        out.append(f"| {k} | {o} | {n} | {p} | {f} | {s} | {ratio_text(w)} | {v} | {t} |")
    out += [
        "",
        "Triage per kernel (cases): "
        + "; ".join(
            f"**{r.kernel}** "
            + (", ".join(f"{kind} {n}" for kind, n in triage.summarize(r.cases)["kinds"].items()) or "-")
            for r in results
        ),
    ]
    out += ["", "Coverage: features the capability makes reachable that no case exercised:"]
    out += [
        f"- **{r.kernel}**: " + (", ".join(f"`{f}`" for f in r.coverage.get("missing") or ()) or "none")
        for r in results
        if r.status != CampaignStatus.UNAVAILABLE
    ]
    pairs = [(r.kernel, r.coverage.get("pairs")) for r in results if (r.coverage or {}).get("pairs")]
    if pairs:
        out += [
            "",
            "Configuration pairs (every pair of two configuration dimensions' values the capability "
            "claims; docs/coverage.md):",
        ]
        out += [f"- **{k}**: {pair_line(p)}" for k, p in pairs]
    rows = _finding_rows(results)
    if rows:
        out += [
            "",
            "Findings (one per distinct bug; cases: failing cases it explains; skipped: drawn problems "
            "not run because it explains them):",
            "",
            "| " + " | ".join(FINDINGS_HEAD) + " |",
            "|" + "---|" * len(FINDINGS_HEAD),
        ]
        out += [
            "| " + " | ".join(x.replace("|", "\\|") if i != 7 else f"`{x}`" for i, x in enumerate(row)) + " |"
            for row in rows
        ]
    for r in results:
        if r.failure is not None:
            out.append("")
            out.append(
                f"**{r.kernel}** failed on `{r.failure.problem.short()}` "
                f"after {r.examples_to_fail} examples ({r.seconds_to_fail:.1f} s); "
                f"reproducer: `{(r.reproducer or {}).get('py', '-')}`"
            )
            out.append("```")
            out.append(r.failure.render())
            out.extend(f"  {d}" for d in getattr(r, "declaration", []))
            out.append("```")
    return "\n".join(out)


def _r(x) -> str:
    return "" if x is None else ratio_text(x)


GATE_HEAD = ("kernel", "output", "gate", "baseline", "candidate", "ratio A", "ratio B", "verdict")


def diff_table(res, everything: bool = False) -> str:
    """A gate result's table (report/ci_gate.py): budget rows always, other gates when
    something changed (``everything``: all rows)."""
    rows = [GATE_HEAD]
    for kernel, output, gate, a, b, ra, rb, verdict in res.rows:
        if everything or gate in RATIO_GATES or verdict != "ok" or a != b:
            rows.append((kernel, output, gate, a, b, _r(ra), _r(rb), verdict))
    return text_table(rows)
