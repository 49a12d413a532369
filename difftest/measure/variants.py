"""``difftest variants``: false alarms on correct kernels, measured.

The twin of ``difftest mutants``: runs campaigns against every CORRECT variant of the
catalogue (``kernels/variants.py``: kernels that round where real kernels round) under a
profile, until each has run ``--cases`` cases or spent ``--per-variant-budget`` seconds, and
reports per variant: cases, false alarms (failed cases, with the first shrunk Problem), and
per output and dtype the worst budget ratio and k_needed. A failure here is a verdict that
would make a team switch the gate off: every row must read 0.

Every case is appended to ``--out-dir``/NAME.jsonl as it finishes (one line: problem,
status, failed gates, per-output ratio and k_needed), so a long run that is stopped keeps
what it measured and ``--from-logs`` renders the table from those files alone.

``--device cuda`` runs the catalogue as it runs on the GPU (``variant-cuda:NAME``,
kernels/variants.py): each variant on CUDA, drawn over what the production GPU kernels accept
(head dims from 1, the ``gpu`` profile's longest rows, the profile ``gpu`` by default). The
same table and logs; several processes, each with ``--only`` and its own ``--out-dir``, shard
a catalogue, and ``--from-logs`` joins them.
"""

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from difftest.errors import InputError
from difftest.safeio import open_append, parse_json, read_lines
from difftest.vocab import Status

CATALOGUE_OF_DEVICE = {"cpu": "variant", "cuda": "variant-cuda"}  # the registry prefix each device runs
DEFAULT_PROFILE = {"cpu": "nightly", "cuda": "gpu"}
MAX_LOG_LINE = 16 * 2**20  # a case line is ~1 kB
MAX_LOG_BYTES = 4 * 2**30  # streamed


@dataclass
class Stat:
    cases: int = 0
    failures: int = 0
    worst_ratio: float = 0.0
    worst_k_needed: float = 0.0

    def add(self, ratio: float, k_needed: float, failed: bool) -> None:
        self.cases += 1
        self.failures += failed
        self.worst_ratio = max(self.worst_ratio, ratio)
        self.worst_k_needed = max(self.worst_k_needed, k_needed)


@dataclass
class VariantRow:
    name: str
    models: str = ""
    cases: int = 0
    failures: int = 0
    errors: int = 0
    campaigns: int = 0
    seconds: float = 0.0
    first_failure: str = ""  # the first failing Problem (JSON), shrunk where the campaign shrank it
    failed_gates: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)  # "output/dtype" -> Stat

    def stat(self, output: str, dtype: str) -> Stat:
        return self.stats.setdefault(f"{output}/{dtype}", Stat())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stats"] = {k: asdict(v) for k, v in self.stats.items()}
        return d


def case_line(case) -> dict:
    """One finished case as a log line (what the table is built from)."""
    outs = {}
    for v in case.verdicts:
        if v.gate == "budget":
            outs[v.output] = [float(v.numbers.get("ratio", 0.0)), float(v.numbers.get("k_needed", 0.0)), v.passed]
    return {
        "problem": case.problem.to_json(),
        "dtype": case.problem.dtype,
        "status": str(case.status),
        "failed": [v.label for v in case.verdicts if not v.passed],
        "budget": outs,
        "reason": (case.reason or "")[:300] if case.status == Status.ERROR else "",
    }


def add_line(row: VariantRow, line: dict) -> None:
    status = Status(line["status"])  # a case log line: the status's value
    if status == Status.SKIPPED:
        return
    row.cases += 1
    failed = status in (Status.FAILED, Status.ERROR)
    row.failures += status == Status.FAILED
    row.errors += status == Status.ERROR
    if failed and not row.first_failure:
        row.first_failure = line["problem"]
        row.failed_gates = line["failed"] or [line.get("reason", "error")]
    for out, (ratio, k_needed, passed) in line["budget"].items():
        row.stat(out, line["dtype"]).add(ratio, k_needed, not passed)


def run_variant(
    entry,
    profile: str = "nightly",
    *,
    cases: int = 200,
    per_variant_budget: float = 600.0,
    shrink_budget: float = 30.0,
    log_path=None,
    progress=None,
    share_gpu: bool = False,
) -> VariantRow:
    """Campaigns (unseeded unless the profile fixes a seed) against one variant until it has
    run ``cases`` cases or spent ``per_variant_budget`` seconds. ``share_gpu``: after each case the
    allocator's cached GPU memory goes back to the device, so variants run side by side in other
    processes on one GPU (one process a variant) find it free."""
    # lazy: keeps torch off --help
    import torch

    from difftest.search.campaign import run_campaign

    row = VariantRow(entry.name, getattr(entry, "models", ""))
    log = os.fdopen(open_append(log_path, root=Path(log_path).parent), "a") if log_path else None
    t0 = time.perf_counter()

    def on_case(case):
        line = case_line(case)
        add_line(row, line)
        if log:
            log.write(json.dumps(line) + "\n")
            log.flush()
        if share_gpu:
            torch.cuda.empty_cache()

    try:
        while row.cases < cases:
            left = per_variant_budget - (time.perf_counter() - t0)
            if left <= 1:
                break
            before = row.cases
            res = run_campaign(
                entry.factory(),
                profile,
                max_examples=cases - row.cases,
                time_budget=left,
                shrink_budget=shrink_budget,
                database=None,
                on_case=on_case,
                edge_cases=row.campaigns == 0,
            )
            row.campaigns += 1
            if res.failure is not None and res.failure.problem.to_json() != row.first_failure:
                row.first_failure = res.failure.problem.to_json()  # the shrunk one says more
            if progress:
                progress(row)
            if row.cases == before:  # nothing ran (budget too small to draw): stop
                break
    finally:
        if log:
            log.close()
    row.seconds = time.perf_counter() - t0
    return row


def rows_from_logs(paths) -> list[VariantRow]:
    """Rebuild the rows from the per-variant case logs (NAME.jsonl): one row a variant, the logs
    of one NAME (a variant run by several processes or machines, each with its --out-dir) joined."""
    rows: dict[str, VariantRow] = {}
    for path in sorted(Path(p) for p in paths):
        row = rows.setdefault(path.stem, VariantRow(path.stem))
        for i, text in read_lines(path, InputError, "variant case log (NAME.jsonl)", MAX_LOG_LINE, MAX_LOG_BYTES):
            text = text.strip()
            if not text:
                continue
            line = parse_json(text, f"{path}:{i}", InputError)  # depth, huge integers, surrogates: one line
            try:
                add_line(row, line)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise InputError(f"{path}: a line that is not a case record ({type(e).__name__})") from None
    return list(rows.values())


def render_markdown(rows, profile: str = "") -> str:
    lines = [
        "| variant | cases | false alarms | errors | worst ratio / k_needed per output and dtype | first failure |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = "; ".join(
            f"{k} {s.worst_ratio:.3g}/{s.worst_k_needed:.3g}" + (f" ({s.failures} failed)" if s.failures else "")
            for k, s in sorted(r.stats.items())
        )
        fail = f"`{r.first_failure}` {', '.join(r.failed_gates[:3])}" if r.first_failure else "-"
        lines.append(f"| {r.name} | {r.cases} | {r.failures} | {r.errors} | {per or '-'} | {fail} |")
    total = sum(r.cases for r in rows)
    bad = sum(r.failures + r.errors for r in rows)
    lines += [
        "",
        f"{len(rows)} variants, {total} cases, {bad} false alarms" + (f" (profile {profile})" if profile else ""),
    ]
    return "\n".join(lines)
