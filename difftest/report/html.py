"""HTML report: one static file (inline CSS and SVG, no script, nothing fetched) that a CI
job uploads and a person opens in a browser.

Per kernel: status and settings, the triage line and every hint the terminal prints under
a campaign (claimed beyond the profile, unexplained failing cases, the budget's unrun
problems, compile reuse, where the time went), the coverage features hit (with case counts)
and missed, the distribution of the budget's error ratio per output (a histogram over
log10(ratio) drawn as inline SVG, with the limit at ratio 1 marked) and each output's
overflow-limited elements, the worst cases with their worst element, the failures with
their reproducers, how to replay them and the declaration problems behind them, and
determinism per output. Ratios read as in the terminal (``write.ratio_text``: the cap is
1e+06). ``difftest gate --html`` puts the gate's findings on top.

Written by ``difftest run`` next to report.json, and by ``difftest report REPORT.json
--html FILE`` from any report (merged, or compressed ``.json.xz``). Key numbers carry a
``data-k`` attribute (``KERNEL/OUTPUT/worst``, ``KERNEL/cases``, ...) so a test or a
script can read them back from the rendered page.
"""

import html
import math
from typing import TYPE_CHECKING

from difftest.execute.timing import render as render_timing
from difftest.judge import triage
from difftest.model.problem import OUTPUTS
from difftest.report.read import Report, finding_case, gate_results
from difftest.report.write import (
    campaign_notes,
    capped,
    compile_reuse_line,
    diff_table,
    output_stats,
    overflow_note,
    pair_line,
    ratio,
    ratio_text,
    replay_line,
)
from difftest.vocab import RATIO_CAP, CampaignStatus, Status

if TYPE_CHECKING:  # annotations only: run/plan imports this module on `difftest list`'s path, which loads no torch
    from difftest.search.result import CampaignResult

LOG_MIN, LOG_MAX, BIN = -4.0, 2.0, 0.25  # histogram range (decades of ratio) and bin width

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff;max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 6px;border-bottom:2px solid #d0d7de}
h3{font-size:15px;margin:16px 0 4px} .meta{color:#57606a}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;
vertical-align:top} th{background:#f6f8fa} .num{text-align:right;font-variant-numeric:tabular-nums}
.passed{color:#1a7f37;font-weight:600} .failed,.error,.REGRESSION{color:#cf222e;font-weight:600}
.unavailable,.known{color:#9a6700;font-weight:600} .chip{display:inline-block;border-radius:10px;
padding:1px 8px;margin:2px;background:#ddf4ff;font-size:12px} .chip.miss{background:#ffebe9;color:#82071e}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap}
.bad{background:#ffebe9} svg text{font:11px system-ui,sans-serif}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _num(x, key: str | None = None) -> str:
    text = "-" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)
    attr = f' data-k="{_e(key)}"' if key else ""
    return f'<td class="num"{attr}>{_e(text)}</td>'


def _ratio(x, key: str | None = None) -> str:
    """A budget ratio's cell, as the terminal prints it (the cap as 1e+06, not inf)."""
    attr = f' data-k="{_e(key)}"' if key else ""
    return f'<td class="num"{attr}>{_e("-" if x is None else ratio_text(x))}</td>'


def kernel_worst(c: "CampaignResult") -> float | None:
    """A campaign's worst ratio as the terminal's "(all)" row gives it: the largest of its
    outputs' and its cases' (None: no case ran)."""
    ran = [x for x in c.cases if x.status != Status.SKIPPED]
    outs = [s["worst_ratio"] for s in output_stats(c.cases).values()]
    return max(outs + [capped(x.worst_ratio) for x in ran], default=0.0) if ran else None


def _hints_html(c: "CampaignResult") -> list[str]:
    """The lines the terminal prints under a campaign's block, beside the numbers."""
    k = c.kernel
    summary = triage.summarize(c.cases)
    out = [f'<p>Triage: <span data-k="{_e(k)}/triage">{_e(triage.describe(summary))}</span></p>']
    notes = campaign_notes(c.profile, c.coverage, c.unexplained_cases, c.unrun, c.cases)
    if c.compile_reuse is not None:
        try:
            notes.append(compile_reuse_line(c.compile_reuse))
        except (KeyError, TypeError, ValueError):
            pass
    out += [f'<p class="meta hint">{_e(n)}</p>' for n in notes]
    if c.timing is not None:
        try:
            out.append(
                f"<details><summary>Where the time went</summary><pre>{_e(render_timing(c.timing))}</pre></details>"
            )
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
            pass
    return out


def _pairs_html(k: str, pairs: dict) -> list[str]:
    """The configuration pairs covered per pair of dimensions (docs/coverage.md)."""
    if not pairs:
        return []
    claimed, covered = pairs.get("claimed", 0), pairs.get("covered", 0)
    out = [
        f'<h3>Configuration pairs: <span data-k="{_e(k)}/pairs_covered">{covered}</span> of '
        f'<span data-k="{_e(k)}/pairs_claimed">{claimed}</span> covered'
        + (f", {pairs['explained']} explained by findings" if pairs.get("explained") else "")
        + "</h3>",
    ]
    by = pairs.get("by_dimensions") or {}
    full = sum(1 for c, n in by.values() if c >= n)
    # one row per pair of dimensions (66 for twelve): folded, so the error plots stay on the first screen
    out.append(
        f"<details><summary>per pair of dimensions: {full} of {len(by)} fully covered</summary>"
        "<table><tr><th>dimensions</th><th>covered</th><th>claimed</th></tr>"
    )
    for name, (c, n) in sorted(by.items(), key=lambda kv: kv[1][0] / max(1, kv[1][1])):
        row_cls = ' class="bad"' if c < n else ""
        out.append(
            f"<tr{row_cls}><td>{_e(name)}</td>"
            + _num(c, f"{k}/pairs/{name}/covered")
            + _num(n, f"{k}/pairs/{name}/claimed")
            + "</tr>"
        )
    out.append("</table></details>")
    missing = pairs.get("missing") or []
    if missing:
        out.append(
            f"<details><summary>{len(missing)} pairs not covered</summary><div>"
            + "".join(f'<span class="chip miss">{_e(m)}</span>' for m in missing[:400])
            + "</div></details>"
        )
    return out


def histogram_svg(ratios_by_output: dict, width: int = 720) -> str:
    """Small multiples: one row per output, a histogram of log10(ratio) between 1e-4 and
    1e2 (ratios below fall in the first bin, above, non-finite and errors in the last),
    the limit (ratio 1) as a red line."""
    rows = [o for o in OUTPUTS if ratios_by_output.get(o)]
    if not rows:
        return "<p>No budget ratios (no case ran).</p>"
    n_bins = int(round((LOG_MAX - LOG_MIN) / BIN))
    left, right, row_h, top = 60, 150, 46, 8
    plot_w = width - left - right
    height = top + row_h * len(rows) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="error ratio distribution per output">'
    ]

    def x_of(lg):
        return left + (lg - LOG_MIN) / (LOG_MAX - LOG_MIN) * plot_w

    for j, name in enumerate(rows):
        rs = ratios_by_output[name]
        counts = [0] * n_bins
        for r in rs:
            lg = math.log10(r) if 0 < r < RATIO_CAP and math.isfinite(r) else (LOG_MIN if r <= 0 else LOG_MAX)
            counts[min(n_bins - 1, max(0, int((lg - LOG_MIN) / BIN)))] += 1
        peak = max(counts)
        y0 = top + j * row_h
        base = y0 + row_h - 8
        out.append(f'<text x="{left - 8}" y="{base - 12}" text-anchor="end">{_e(name)}</text>')
        out.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#8c959f"/>')
        for b, c in enumerate(counts):
            if not c:
                continue
            h = max(2.0, (row_h - 14) * c / peak)
            lo = LOG_MIN + b * BIN
            colour = "#cf222e" if lo >= 0 else "#0969da"
            span = (
                f"ratio <= 1e{lo + BIN:g}"
                if b == 0
                else f"ratio >= 1e{lo:g} (or not finite)"
                if b == n_bins - 1
                else f"ratio 1e{lo:g}..1e{lo + BIN:g}"
            )
            out.append(
                f'<rect x="{x_of(lo) + 0.5:.1f}" y="{base - h:.1f}" width="{plot_w / n_bins - 1:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{c} cases, {span}</title></rect>'
            )
        out.append(f'<text x="{left + plot_w + 8}" y="{base - 12}">n={len(rs)} worst {ratio_text(max(rs))}</text>')
    x1 = x_of(0.0)
    out.append(
        f'<line x1="{x1:.1f}" y1="{top}" x2="{x1:.1f}" y2="{top + row_h * len(rows)}" stroke="#cf222e" '
        f'stroke-dasharray="4 3"/>'
    )
    axis_y = top + row_h * len(rows) + 14
    for lg in range(int(LOG_MIN), int(LOG_MAX) + 1):
        label = "1" if lg == 0 else f"1e{lg}"
        out.append(f'<text x="{x_of(lg):.1f}" y="{axis_y}" text-anchor="middle">{label}</text>')
    out.append(
        f'<text x="{left + plot_w / 2}" y="{axis_y + 14}" text-anchor="middle">'
        f"error ratio (error / limit; the red line is the limit)</text>"
    )
    out.append("</svg>")
    return "".join(out)


def _kernel_section(c: "CampaignResult") -> str:
    k = c.kernel
    s = c.settings
    cases = c.cases
    counts = {st: sum(1 for x in cases if x.status == st) for st in ("passed", "failed", "error", "skipped")}
    out = [f'<h2 id="{_e(k)}">{_e(k)} <span class="{_e(c.status)}" data-k="{_e(k)}/status">{_e(c.status)}</span></h2>']
    meta = [f"profile {c.profile or None}", f"seed {s.get('seed')}", f"{c.elapsed:.1f} s"]
    if s.get("shard"):
        meta.append(f"shard {s['shard']}")
    if s.get("shards"):
        meta.append(f"merged from {s['shards']} shards")
    if s.get("narrowed"):
        meta.append(f"narrowed {s['narrowed']}")
    out.append(f'<p class="meta">{_e(" · ".join(meta))}</p>')
    if c.status == CampaignStatus.UNAVAILABLE:
        out.append(f"<p>Unavailable: {_e(c.reason)}</p>")
        return "\n".join(out)
    out.append(
        "<table><tr><th>cases</th><th>passed</th><th>failed</th><th>error</th><th>skipped</th></tr><tr>"
        + _num(len(cases), f"{k}/cases")
        + "".join(_num(counts[st], f"{k}/{st}") for st in counts)
        + "</tr></table>"
    )
    out += _hints_html(c)
    # coverage
    cov = c.coverage
    hit, missing = cov.get("hit") or {}, cov.get("missing") or []
    out.append(
        f'<h3>Coverage: <span data-k="{_e(k)}/features_hit">{len(hit)}</span> features hit, '
        f'<span data-k="{_e(k)}/features_missing">{len(missing)}</span> missing</h3><div>'
    )
    out += [f'<span class="chip" title="{n} cases">{_e(f)} ×{n}</span>' for f, n in hit.items()]
    out += [f'<span class="chip miss" title="expected, never drawn">{_e(f)}</span>' for f in missing]
    out.append("</div>")
    if cov.get("pairs"):
        out.append(f'<p class="meta">configuration pairs: {_e(pair_line(cov["pairs"]))}</p>')
    out += _pairs_html(k, cov.get("pairs") or {})
    # error ratio per output
    ratios = {}
    for x in cases:
        if x.status == Status.SKIPPED:
            continue
        for v in x.verdicts:
            if v.gate == "budget":
                ratios.setdefault(v.output, []).append(ratio(v))
    out.append("<h3>Error ratio per output</h3>")
    out.append(histogram_svg(ratios))
    gates = gate_results(c)
    limited = triage.summarize(cases)["overflow_limited"]
    out.append(
        "<table><tr><th>output</th><th>cases</th><th>failed</th><th>worst ratio</th><th>gates failing</th>"
        "<th>triage</th></tr>"
    )
    for o in OUTPUTS:
        if o not in ratios and not any(key[0] == o for key in gates):
            continue
        checked = max((g["checked"] for key, g in gates.items() if key[0] == o), default=0)
        failing = [f"{key[1]} ({g['failed']})" for key, g in gates.items() if key[0] == o and g["failed"]]
        n_failed = sum(
            1 for x in cases if x.status != Status.SKIPPED and any(v.output == o and not v.passed for v in x.verdicts)
        )
        row_cls = ' class="bad"' if failing else ""
        out.append(
            f"<tr{row_cls}><td>{_e(o)}</td>"
            + _num(checked, f"{k}/{o}/cases")
            + _num(n_failed, f"{k}/{o}/failed")
            + _ratio(max(ratios.get(o, [0.0])), f"{k}/{o}/worst")
            + f"<td>{_e(', '.join(failing))}</td><td>{_e(overflow_note(limited, o))}</td></tr>"
        )
    out.append("</table>")
    # worst cases
    ranked = sorted((x for x in cases if x.status in (Status.PASSED, Status.FAILED)), key=lambda x: -x.worst_ratio)[:5]
    if ranked:
        out.append(
            "<h3>Worst cases</h3><table><tr><th>problem</th><th>output</th><th>ratio</th>"
            "<th>worst element (seq, token, head, dim)</th><th>got</th><th>truth</th></tr>"
        )
        for x in ranked:
            vs = [v for v in x.verdicts if v.gate == "budget"]
            if not vs:
                continue
            v = max(vs, key=ratio)
            w = v.worst or {}
            where = ", ".join(f"{n} {w[n]}" for n in ("seq", "token", "head", "dim") if n in w)
            out.append(
                f"<tr><td>{_e(x.problem.short())}</td><td>{_e(v.output)}</td>{_ratio(ratio(v))}"
                f"<td>{_e(where)}</td>{_num(w.get('got'))}{_num(w.get('truth'))}</tr>"
            )
        out.append("</table>")
    out += _findings_section(c)
    # failures
    failing = [x for x in cases if x.status in (Status.FAILED, Status.ERROR)]
    out.append(f'<h3>Failures: <span data-k="{_e(k)}/failing_cases">{len(failing)}</span> failing cases</h3>')
    shrunk = [(c.failure, c.reproducer, c.declaration)] if c.failure else []
    shrunk += [(f["failure"], f["reproducer"], []) for f in c.failures[1:] if f["failure"]]
    for fail, repro, declaration in shrunk:
        lines = [f"shrunk: {fail.problem.short()}", f"failed gates: {', '.join(fail.failed_gates)}"]
        if fail.reason:
            lines.append(f"reason: {fail.reason.strip()}")
        lines += [v.message for v in fail.verdicts if not v.passed]
        lines += declaration  # "declaration problem? ...": what the capability may claim wrongly
        for kind in ("py", "json"):
            if (repro or {}).get(kind):
                lines.append(f"reproducer ({kind}): {repro[kind]}")
        if isinstance(repro, dict) and repro.get("json"):
            lines.append(replay_line(repro))
        out.append(f"<pre>{_e(chr(10).join(lines))}</pre>")
    if failing:
        out.append("<table><tr><th>problem</th><th>status</th><th>failed gates / reason</th></tr>")
        for x in failing[:20]:
            why = ", ".join(x.failed_gates) or x.reason.strip().split("\n")[0][:200]
            out.append(
                f"<tr><td>{_e(x.problem.short())}</td><td class='{_e(x.status)}'>{_e(x.status)}"
                f"</td><td>{_e(why)}</td></tr>"
            )
        out.append(
            "</table>"
            + (f"<p>… and {len(failing) - 20} more (report.json has them all)</p>" if len(failing) > 20 else "")
        )
    # determinism
    det = {key: g for key, g in gates.items() if key[1] in ("determinism", "determinism_info")}
    out.append("<h3>Determinism</h3>")
    if not det:
        out.append("<p>Not measured (one call per case; run with <code>--determinism N</code>).</p>")
    else:
        runs = max(
            v.numbers.get("runs", 0) for x in cases for v in x.verdicts if v.gate in ("determinism", "determinism_info")
        )
        claimed = any(key[1] == "determinism" for key in det)
        out.append(
            f"<p>{runs} calls per case; "
            f"{'claimed by the kernel (a gate)' if claimed else 'measured, not claimed'}"
            "</p><table><tr><th>output</th><th>cases</th><th>cases differing</th></tr>"
        )
        for (o, _), g in sorted(det.items(), key=lambda kv: OUTPUTS.index(kv[0][0]) if kv[0][0] in OUTPUTS else 99):
            bad = ' class="bad"' if g["differing_cases"] else ""
            out.append(
                f"<tr{bad}><td>{_e(o)}</td>"
                + _num(g["checked"])
                + _num(g["differing_cases"], f"{k}/{o}/nondeterministic")
                + "</tr>"
            )
        out.append("</table>")
    return "\n".join(out)


def _findings_section(c: "CampaignResult") -> list[str]:
    """One row per distinct finding: its signature, cases that hit it, first seen, reproducer."""
    k = c.kernel
    findings = c.findings
    if not findings:
        return []
    out = [
        f'<h3>Findings: <span data-k="{_e(k)}/findings">{len(findings)}</span> distinct '
        f"({'hunt: the search went on after each' if c.hunt else 'first failure'})</h3>"
    ]
    if c.explained_skipped:
        out.append(f'<p class="meta">{_e(c.explained_skipped)} drawn problems not run: a finding explains them</p>')
    if c.unexplained:
        out.append(
            f'<p class="meta">{_e(c.unexplained)} failing cases no finding explains '
            f"(findings cap or budget reached)</p>"
        )
    out.append(
        "<table><tr><th>finding</th><th>status</th><th>cases</th><th>first seen</th><th>signature</th>"
        "<th>shrunk problem</th><th>reproducer</th></tr>"
    )
    for f in findings:
        sig, seen, rep = (
            f.get(x) if isinstance(f.get(x), dict) else {}  # a hand-edited report: no crash
            for x in ("signature", "first_seen", "reproducer")
        )
        shrunk = finding_case(f, k)
        repro = rep.get("py") or rep.get("json") or ""
        cls = "known" if f.get("status") == "known" else "REGRESSION"
        out.append(
            f'<tr><td>{_e(f.get("id", ""))}</td><td class="{cls}">{_e(f.get("status", ""))}</td>'
            + _num(f.get("hits", 0), f"{k}/finding/{f.get('id', '')}/cases")
            + f"<td>{_e('case ' + str(seen['case']) if seen.get('case') else 'not hit')}</td>"
            f"<td>{_e(sig.get('describe', ''))}</td>"
            f"<td>{_e(shrunk.problem.short() if shrunk else '')}</td>"
            f"<td>{_e(repro)}</td></tr>"
        )
    out.append("</table>")
    return out


def _gate_section(res) -> str:
    verdict = "PASSED" if res.passed else "FAILED"
    out = [f'<h2>Gate: <span class="{"passed" if res.passed else "failed"}" data-k="gate">{verdict}</span></h2>']
    if res.findings:
        out.append("<table><tr><th>kind</th><th>finding</th></tr>")
        for f in res.findings:
            cls = "REGRESSION" if f.blocking else "known"  # known failures and not reached: listed, not blocking
            extra = f"\nreproducer: {f.reproducer}" if f.reproducer else ""
            out.append(f'<tr><td class="{cls}">{_e(f.kind)}</td><td>{_e(f.message + extra)}</td></tr>')
        out.append("</table>")
    out += [f'<p class="meta">note: {_e(n)}</p>' for n in res.notes]
    out.append(f"<pre>{_e(diff_table(res))}</pre>")
    return "\n".join(out)


def render_html(doc, gate=None, title: str = "difftest report") -> str:
    """The page of a report (a Report, or its document: read as one)."""
    report = Report.of(doc)
    camps, meta = report.campaigns, report.header
    head = [f"{meta.get('created', '')}", f"host {meta.get('host', '')}", f"torch {meta.get('torch', '')}"]
    if meta.get("cuda"):
        head.append(str(meta["cuda"]))
    rows = "".join(
        f'<tr><td><a href="#{_e(c.kernel)}">{_e(c.kernel)}</a></td>'
        f'<td class="{_e(c.status)}">{_e(c.status)}</td>'
        + _num(len(c.cases))
        + _ratio(kernel_worst(c), f"{c.kernel}/worst")
        + "</tr>"
        for c in camps
    )
    body = [f"<h1>{_e(title)}</h1>", f'<p class="meta">{_e(" · ".join(head))}</p>']
    if gate is not None:
        body.append(_gate_section(gate))
    body.append("<table><tr><th>kernel</th><th>status</th><th>cases</th><th>worst ratio</th></tr>" + rows + "</table>")
    body += [_kernel_section(c) for c in camps]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
