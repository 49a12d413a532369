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
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from difftest.errors import InputError
from difftest.model.profiles import PROFILES, get_profile
from difftest.printable import block
from difftest.safeio import atomic_write_text, ensure_dir, open_append, parse_json, read_lines
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
    return {"problem": case.problem.to_json(), "dtype": case.problem.dtype, "status": str(case.status),
            "failed": [v.label for v in case.verdicts if not v.passed], "budget": outs,
            "reason": (case.reason or "")[:300] if case.status == Status.ERROR else ""}


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


def run_variant(entry, profile: str = "nightly", *, cases: int = 200, per_variant_budget: float = 600.0,
                shrink_budget: float = 30.0, log_path=None, progress=None, share_gpu: bool = False) -> VariantRow:
    """Campaigns (unseeded unless the profile fixes a seed) against one variant until it has
    run ``cases`` cases or spent ``per_variant_budget`` seconds. ``share_gpu``: after each case the
    allocator's cached GPU memory goes back to the device, so variants run side by side in other
    processes on one GPU (one process a variant) find it free."""
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
            res = run_campaign(entry.factory(), profile, max_examples=cases - row.cases, time_budget=left,
                               shrink_budget=shrink_budget, database=None, on_case=on_case,
                               edge_cases=row.campaigns == 0)
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
                raise ValueError(f"{path}: a line that is not a case record ({type(e).__name__})") from None
    return list(rows.values())


def render_markdown(rows, profile: str = "") -> str:
    lines = ["| variant | cases | false alarms | errors | worst ratio / k_needed per output and dtype "
             "| first failure |", "|---|---|---|---|---|---|"]
    for r in rows:
        per = "; ".join(f"{k} {s.worst_ratio:.3g}/{s.worst_k_needed:.3g}" + (f" ({s.failures} failed)" if s.failures
                                                                              else "")
                        for k, s in sorted(r.stats.items()))
        fail = f"`{r.first_failure}` {', '.join(r.failed_gates[:3])}" if r.first_failure else "-"
        lines.append(f"| {r.name} | {r.cases} | {r.failures} | {r.errors} | {per or '-'} | {fail} |")
    total = sum(r.cases for r in rows)
    bad = sum(r.failures + r.errors for r in rows)
    lines += ["", f"{len(rows)} variants, {total} cases, {bad} false alarms" + (f" (profile {profile})" if profile
                                                                                else "")]
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    from difftest.commands.argcheck import nonneg_float, positive_float, positive_int

    p.add_argument("--profile", "-p", default=None, choices=sorted(PROFILES),
                   help="campaign profile (default nightly on the CPU: unseeded, the widest CPU draws; gpu on CUDA)")
    p.add_argument("--device", choices=sorted(CATALOGUE_OF_DEVICE), default="cpu",
                   help="where the variants run (default cpu); cuda: each variant on the GPU, drawn over the "
                        "production GPU kernels' head dims and rows (the variant-cuda catalogue)")
    p.add_argument("--cases", type=positive_int, default=200, help="cases per variant (default 200)")
    p.add_argument("--per-variant-budget", type=positive_float, default=600.0,
                   help="seconds per variant (default 600)")
    p.add_argument("--shrink-budget", type=nonneg_float, default=30.0, help="shrink seconds per failure (30)")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="run only these variants")
    p.add_argument("--out-dir", default=None, help="per-variant case logs (NAME.jsonl), appended to")
    p.add_argument("--from-logs", nargs="+", metavar="JSONL", default=None,
                   help="render the table from case logs written before (runs nothing)")
    p.add_argument("--out", default=None, help="write the markdown table here")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")


def command(args) -> int:
    from difftest.commands.argcheck import UsageError
    from difftest.execute.adapter import catalogue as catalogue_for

    device = getattr(args, "device", "cpu")
    if device == "cuda" and not args.from_logs and not args.list:
        from difftest.commands.argcheck import check_device

        check_device(device)
    profile = args.profile or DEFAULT_PROFILE[device]
    entries = catalogue_for(CATALOGUE_OF_DEVICE[device]).entries()
    if args.list:
        for v in entries.values():
            print(f"{v.name:32s} {'' if v.deterministic else '(non-deterministic) '}{v.description}")
        return 0
    if args.from_logs:
        try:
            rows = rows_from_logs(args.from_logs)
        except OSError as e:
            raise UsageError(f"--from-logs: {e.strerror}: {e.filename}") from None
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        unknown = sorted(set(args.only or ()) - set(entries))
        if unknown:
            raise UsageError(f"--only {' '.join(unknown)}: unknown variants; allowed names from "
                             f"`difftest variants --list`")
        get_profile(profile)
        out_dir = Path(args.out_dir) if args.out_dir else None
        if out_dir:
            ensure_dir(out_dir)
        rows = []
        for name in args.only or list(entries):
            row = run_variant(entries[name], profile, cases=args.cases,
                              per_variant_budget=args.per_variant_budget, shrink_budget=args.shrink_budget,
                              log_path=None if out_dir is None else out_dir / f"{name}.jsonl",
                              share_gpu=device == "cuda")
            print(f"{row.name:32s} {row.cases:6d} cases {row.failures:3d} false alarms {row.errors:3d} errors "
                  f"{row.seconds:7.0f} s", file=sys.stderr, flush=True)
            rows.append(row)
    ran = "" if args.from_logs else f"{profile}, device {device}"
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
    else:
        print(block(render_markdown(rows, ran)))  # log text: printable
    if args.out:
        atomic_write_text(args.out, render_markdown(rows, ran) + "\n")
    return 0 if all(r.failures == 0 and r.errors == 0 for r in rows) else 1
