"""``difftest mutants``: detection power, measured.

Runs a campaign (``campaign.run_campaign``) against every fault-injected kernel of the
catalogue (``kernels/mutants.py``, plus TileLang mutants where they load) under a
per-mutant time budget, and optionally the FlashAttention-style grid baseline
(``difftest/measure/grid.py``) against the same mutants with the same budget, then prints one
table: mutant, bug class, killed or survived, examples and seconds to kill, the gate that
fired, the shrunk Problem (size and one-line form), and the grid's outcome beside it.

A kill counts only when it is genuine: the shrunk failing Problem must pass on the
mutant's clean kernel (a kill made by a flaky gate on a correct kernel is "spurious" and
counts as a survivor). Exit status is non-zero when any mutant survives, when the whole
run exceeds ``--time-budget``, or (with the grid) when difftest does not beat the grid:
strictly more kills, or as many with a lower median time to kill.
"""

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from difftest.execute.adapter import catalogue as catalogue_for
from difftest.judge.runner import RunConfig, run_case
from difftest.measure.grid import run_grid
from difftest.model.profiles import PROFILES, get_profile
from difftest.safeio import atomic_write_text
from difftest.search.campaign import run_campaign
from difftest.vocab import MutantStatus, Status


@dataclass
class MutantRow:
    name: str
    bug_class: str
    source: str
    status: MutantStatus
    examples: int | None = None
    seconds: float | None = None
    gates: list = field(default_factory=list)
    size: int | None = None
    problem: str = ""
    problem_json: str = ""
    clean_passes: bool | None = None
    elapsed: float = 0.0
    reason: str = ""
    grid_status: MutantStatus | None = None  # killed | survived | None (grid not run)
    grid_examples: int | None = None
    grid_seconds: float | None = None
    grid_gates: list = field(default_factory=list)
    grid_cases: int = 0
    expected_of: str = "ci"  # the smallest profile expected to kill it (the catalogue entry's ``profile``)
    expected: bool = True  # whether this run's profile is expected to kill it

    def __post_init__(self):
        self.status = MutantStatus(self.status)
        self.grid_status = None if self.grid_status is None else MutantStatus(self.grid_status)

    @property
    def killed(self) -> bool:
        return self.status == MutantStatus.KILLED

    @property
    def grid_killed(self) -> bool:
        return self.grid_status == MutantStatus.KILLED


@dataclass
class MutantReport:
    profile: str
    per_mutant_budget: float
    shrink_budget: float
    time_budget: float
    rows: list = field(default_factory=list)
    skipped_sources: dict = field(default_factory=dict)
    elapsed: float = 0.0
    grid: bool = False
    device: str | None = None  # every campaign's device (None: each mutant's own capability device)

    @property
    def survivors(self) -> list:
        failing = (MutantStatus.SURVIVED, MutantStatus.SPURIOUS, MutantStatus.ERROR)
        return [r for r in self.rows if r.status in failing and r.expected]

    @property
    def beyond_profile(self) -> list:
        """Rows not expected of this run's profile (shown, never counted as survivors)."""
        return [r for r in self.rows if not r.expected]

    @property
    def kills(self) -> int:
        return sum(r.killed for r in self.rows)

    @property
    def grid_kills(self) -> int:
        return sum(r.grid_killed for r in self.rows)

    def median_kill_seconds(self, grid: bool = False) -> float | None:
        xs = [r.grid_seconds if grid else r.seconds for r in self.rows if (r.grid_killed if grid else r.killed)]
        return statistics.median(xs) if xs else None

    @property
    def difftest_elapsed(self) -> float:
        """Seconds spent in difftest's campaigns and kill checks (the grid excluded)."""
        return sum(r.elapsed for r in self.rows)

    @property
    def over_budget(self) -> bool:
        return self.difftest_elapsed > self.time_budget

    def beats_grid(self) -> bool | None:
        if not self.grid:
            return None
        if self.kills != self.grid_kills:
            return self.kills > self.grid_kills
        a, b = self.median_kill_seconds(), self.median_kill_seconds(grid=True)
        return a is not None and b is not None and a < b

    @property
    def ok(self) -> bool:
        return not self.survivors and not self.over_budget and self.beats_grid() is not False

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            difftest_elapsed=self.difftest_elapsed,
            kills=self.kills,
            grid_kills=self.grid_kills,
            median_kill_s=self.median_kill_seconds(),
            grid_median_kill_s=self.median_kill_seconds(grid=True),
            beats_grid=self.beats_grid(),
            over_budget=self.over_budget,
            ok=self.ok,
        )
        return d


def _reach(profile: str) -> int:
    """How far a catalogue entry's ``profile`` reaches (an unknown name: as far as ci)."""
    return PROFILES[profile].mutant_reach if profile in PROFILES else 0


def _clean_kernel(entry):
    """The correct kernel a mutant deviates from (None: unknown, kill not verified)."""
    clean = getattr(entry, "clean", None)
    return clean() if clean is not None else None


def run_mutant(
    entry,
    profile: str = "ci",
    *,
    per_mutant_budget: float | None = None,
    shrink_budget: float | None = None,
    max_examples: int | None = None,
    grid: bool = False,
    out_dir=None,
    database: str | None = None,
    config: RunConfig | None = None,
) -> MutantRow:
    """One mutant: a campaign (and the grid) with fresh adapters, judged the same way."""
    prof = get_profile(profile)
    search_s = per_mutant_budget if per_mutant_budget is not None else prof.mutant_search_s
    shrink_s = shrink_budget if shrink_budget is not None else prof.mutant_shrink_s
    row = MutantRow(entry.name, entry.bug_class, getattr(entry, "source", "blockwise"), MutantStatus.SURVIVED)
    t0 = time.perf_counter()
    kernel = entry.make()
    why = kernel.available()
    if why:
        row.status, row.reason = MutantStatus.UNAVAILABLE, why
        return row
    res = run_campaign(
        kernel,
        profile,
        max_examples=max_examples,
        time_budget=search_s,
        shrink_budget=shrink_s,
        out_dir=None if out_dir is None else Path(out_dir) / entry.name,
        config=config,
        database=database,
        hunt=False,
    )  # a mutant is killed by its first failure
    if res.failure is not None:
        f = res.failure
        row.examples, row.seconds = res.examples_to_fail, res.seconds_to_fail
        row.gates = f.failed_gates or ([f"error: {f.reason.splitlines()[0]}"] if f.reason else [])
        row.size, row.problem, row.problem_json = f.problem.size(), f.problem.short(), f.problem.to_json()
        clean = _clean_kernel(entry)
        if clean is not None:
            c = run_case(clean, f.problem, config)
            row.clean_passes = c.status == Status.PASSED
        row.status = MutantStatus.KILLED if row.clean_passes is not False else MutantStatus.SPURIOUS
        if row.status == MutantStatus.SPURIOUS:
            row.reason = f"the clean kernel fails the shrunk Problem too ({', '.join(c.failed_gates)})"
    else:
        row.reason = f"{len(res.cases)} cases in {res.elapsed:.1f}s found nothing"
    row.elapsed = time.perf_counter() - t0  # campaign + kill check; the grid is timed apart
    if grid:
        g = run_grid(entry.make(), search_s, config=config)
        row.grid_cases = len(g.cases)
        if g.failure is not None:
            row.grid_status = MutantStatus.KILLED
            row.grid_examples, row.grid_seconds = g.examples_to_fail, g.seconds_to_fail
            row.grid_gates = g.failure.failed_gates or ["error"]
        else:
            row.grid_status = MutantStatus.SURVIVED
    return row


def run_mutants(
    names=None,
    profile: str = "ci",
    *,
    per_mutant_budget: float | None = None,
    shrink_budget: float | None = None,
    time_budget: float | None = None,
    max_examples: int | None = None,
    grid: bool = False,
    out_dir=None,
    database: str | None = None,
    config: RunConfig | None = None,
    progress=None,
) -> MutantReport:
    """Every mutant (or those in ``names``); ``progress``: a callable given each row."""
    catalogue = catalogue_for("mutant")
    prof = get_profile(profile)
    report = MutantReport(
        profile,
        per_mutant_budget if per_mutant_budget is not None else prof.mutant_search_s,
        shrink_budget if shrink_budget is not None else prof.mutant_shrink_s,
        time_budget if time_budget is not None else prof.mutant_total_s,
        grid=grid,
        skipped_sources=catalogue.skipped(),
        device=config.device if config else None,
    )
    entries = catalogue.entries()
    if names:
        unknown = [n for n in names if n not in entries]
        if unknown:
            raise KeyError(f"unknown mutants {unknown}: known mutants are {sorted(entries)}")
        entries = {n: entries[n] for n in names}
    t0 = time.perf_counter()
    for entry in entries.values():
        t1 = time.perf_counter()
        try:
            row = run_mutant(
                entry,
                profile,
                per_mutant_budget=report.per_mutant_budget,
                shrink_budget=report.shrink_budget,
                max_examples=max_examples,
                grid=grid,
                out_dir=out_dir,
                database=database,
                config=config,
            )
        except Exception as e:  # an engine crash on one mutant is that mutant's row, not the run's end
            row = MutantRow(
                entry.name,
                entry.bug_class,
                getattr(entry, "source", "blockwise"),
                MutantStatus.ERROR,
                elapsed=time.perf_counter() - t1,
                reason=f"{type(e).__name__}: {e}",
            )
        row.expected_of = getattr(entry, "profile", "ci")
        row.expected = _reach(row.expected_of) <= prof.mutant_reach
        report.rows.append(row)
        if progress:
            progress(row)
    report.elapsed = time.perf_counter() - t0
    return report


# --------------------------------------------------------------------------- rendering
def fmt_s(x):
    return "-" if x is None else f"{x:.1f}"


def fmt_n(x):
    return "-" if x is None else str(x)


def render_markdown(report: MutantReport) -> str:
    head = ["mutant", "class", "difftest", "examples", "s to kill", "gate", "shrunk size", "shrunk problem"]
    if report.grid:
        head += ["grid", "grid examples", "grid s to kill", "grid gate"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report.rows:
        gates = ", ".join(r.gates[:3]) + (" ..." if len(r.gates) > 3 else "")
        status = r.status if r.expected else f"{r.status} (expected of {r.expected_of})"
        cells = [
            r.name,
            r.bug_class,
            status,
            fmt_n(r.examples),
            fmt_s(r.seconds),
            gates or "-",
            fmt_n(r.size),
            f"`{r.problem}`" if r.problem else (r.reason or "-"),
        ]
        if report.grid:
            gg = ", ".join(r.grid_gates[:2]) + (" ..." if len(r.grid_gates) > 2 else "")
            cells += [r.grid_status or "-", fmt_n(r.grid_examples), fmt_s(r.grid_seconds), gg or "-"]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    n = len(report.rows)
    lines.append("")
    lines.append(f"difftest: {report.kills}/{n} killed, median time to kill {fmt_s(report.median_kill_seconds())} s")
    if report.beyond_profile:
        lines.append(
            "not expected of the "
            + report.profile
            + " profile (not counted as survivors): "
            + ", ".join(f"{r.name} {r.status}" for r in report.beyond_profile)
        )
    if report.grid:
        lines.append(
            f"grid baseline: {report.grid_kills}/{n} killed, median time to kill "
            f"{fmt_s(report.median_kill_seconds(grid=True))} s "
            f"(same {report.per_mutant_budget:g} s budget per mutant)"
        )
        lines.append(f"difftest beats the grid: {'yes' if report.beats_grid() else 'NO'}")
    device = f"device {report.device} for every mutant" if report.device else "each mutant on its own device"
    lines.append(
        f"{device}; profile {report.profile}; per mutant: {report.per_mutant_budget:g} s search + "
        f"{report.shrink_budget:g} s shrink; difftest total {report.difftest_elapsed:.0f} s of a "
        f"{report.time_budget:g} s budget{' (OVER BUDGET)' if report.over_budget else ''}; "
        f"whole run {report.elapsed:.0f} s"
    )
    for src, why in report.skipped_sources.items():
        lines.append(f"skipped mutant source {src}: {why}")
    return "\n".join(lines)


def write_results(report: MutantReport, path, command: str = "") -> None:
    text = [
        "# Mutant kill table",
        "",
        "Generated by `" + (command or "difftest mutants") + "`; do not edit by hand.",
        "",
        render_markdown(report),
        "",
    ]
    atomic_write_text(path, "\n".join(text))  # no link followed where it writes (safeio)
