"""One run of campaigns, for every front: ``difftest run`` (commands/cli.py parses its
arguments into ``RunOptions``) and the pytest plugin's ``difftest_campaign`` fixture and
``--difftest-kernel`` items both run their campaigns through a ``RunPlan``, so the two
cannot drift apart in how a campaign runs.

A RunPlan owns, in this order:

1. the run folder (``run/folder.py``: ``OUT/runs/<run id>/``) and, with ``--resume``,
   the killed run it continues (kernels that finished are taken from their record);
2. the CPU threads of this process and of its kernel worker (``run/threads.py``), chosen
   before torch loads; with one campaign at a time the kernel worker is prestarted here so
   its imports overlap ours (``execute/isolation.py``);
3. the lanes (``run/lanes.py``): with ``jobs`` > 1 the campaigns run side by side, each
   in its own forked process with its own worker;
4. the prebuild of JIT kernels (``run/prebuild.py``) before each campaign starts: all of
   them before the first campaign when campaigns run one at a time; with lanes, in the lane
   of the kernel's campaign, which lanes take first, so its builds run beside the other
   lanes' campaigns (a cold CPU main job: 25 TileLang builds, ~20 s on 2 cores, no longer
   wait for nothing);
5. the campaign itself (``search/campaign.py``), recorded in the run folder as it finishes;
6. the reports: ``report.json``, ``summary.md``, ``report.html`` in the run folder, then
   published to ``OUT`` (CLI) or kept in the folder (pytest: several xdist workers share
   one ``OUT``).

The kernel worker a campaign runs against was started with the environment the campaign
runs in: ``isolation.shared_worker`` restarts a worker whose environment differs (a
``monkeypatch.setenv`` between two fixture calls reaches the kernel).

``RunOptions`` is frozen: what was asked. The decisions taken while running (campaigns at
once, the lanes' thread counts, the worker) are the plan's own attributes.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import sys
import time
from pathlib import Path
from typing import Any

from difftest.argcheck import UsageError, check_database, check_device, check_outputs, check_workdir
from difftest.errors import EXIT_FAILED, EXIT_NOTHING_CHECKED, EXIT_PASSED
from difftest.execute import adapter as registry
from difftest.execute.interrupt import Interrupted, deferred, interruptible
from difftest.execute.isolation import COMPILE_TIMEOUT_S, close_all, prestart, share_cores
from difftest.execute.timing import render
from difftest.judge.declaration import claim_line
from difftest.model.capability import parse_narrowing
from difftest.model.problem import OUTPUTS
from difftest.printable import block, cell
from difftest.report.checked import checked_status, run_checked_nothing
from difftest.report.html import render_html
from difftest.report.read import written_report
from difftest.report.write import (
    campaign_notes,
    campaign_record,
    compile_reuse_line,
    findings_table,
    markdown_summary,
    pair_line,
    rate_line,
    rates,
    replay_line,
    report_text,
    summary_table,
    write_findings,
)
from difftest.run import heap, lanes, threads
from difftest.run import prebuild as warmup
from difftest.run.folder import CRASH_LOG, PLANS, Run, RunError, record_crash, result_from_record
from difftest.run.split import RunSplit
from difftest.safeio import atomic_write_text, ensure_dir, open_append
from difftest.search.case_log import logged_cases
from difftest.search.limits import check_problem_size
from difftest.search.signature import SignatureError, known_for, load_known
from difftest.vocab import CampaignStatus, RunStatus
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT, claim_hypothesis_home

# The embedded default campaign: CPU kernels that run anywhere torch runs, and our
# TileLang kernel (deterministic dQ) compiled for the CPU when tilelang is installed.
DEFAULT_KERNELS = ("torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang-det")
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_COMPILE_TIMEOUT_S = COMPILE_TIMEOUT_S  # isolation's default, named once there
# the share of --time-budget a campaign keeps however long its prebuild took (budget_after_prebuild)
PREBUILD_FLOOR = 0.1
PYTEST_RUNS = "pytest"  # OUT/pytest/runs/<id>: a pytest session's run folders, apart from `difftest run --resume`'s


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What a run was asked for (``difftest run``'s flags; the pytest plugin's options)."""

    kernels: tuple = ()  # registry names or "module:attr" specs; empty: DEFAULT_KERNELS
    profile: str = "ci"
    max_examples: int | None = None
    time_budget: float | None = None
    shrink_budget: float | None = None
    out: str = DEFAULT_OUT
    report: str | None = None  # extra copies of the reports at the user's paths
    markdown: str | None = None
    html: str | None = None
    device: str | None = None
    prebuild: bool = True
    isolate: bool = True
    timeout: float | None = None
    compile_timeout: float | None = None
    determinism: int | None = None
    k: tuple = ()  # (output, k) pairs, range-checked by argcheck.k_item
    standard: tuple = ()  # "OUTPUT:SPEC" strings
    second_reference: str | None = None
    truth: str = "float64"
    chunk_threshold: int | None = None
    poison: bool = True
    narrow: tuple = ()
    edge_cases: bool = True
    db: str = DEFAULT_DB  # "none": neither the failure store nor Hypothesis's example database
    quiet: bool = False
    seed: int | None = None  # None: the profile's
    shard: tuple | None = None
    threads: int | None = None
    jobs: int | None = None  # None: auto (lanes.choose)
    hunt: bool | None = None  # go on after a failure (None: the profile's; search/campaign.py)
    max_findings: int | None = None  # distinct findings a hunt shrinks at most (None: the campaign's 16)
    coverage: int | None = None  # the coverage phase's strength (None: the profile's; search/configuration_phase.py)
    known: tuple = ()  # --known files: findings of earlier runs (search/signature.py's load_known)
    values_from: str | None = None  # a capture file (difftest/model/capture.py): values drawn from it
    argv: tuple = ()  # the command line, kept in run.json for --resume

    @classmethod
    def from_args(cls, a) -> RunOptions:
        """The options of a parsed ``difftest run`` Namespace (read, never written)."""
        return cls(
            kernels=tuple(a.kernels or ()),
            profile=a.profile,
            max_examples=a.max_examples,
            time_budget=a.time_budget,
            shrink_budget=a.shrink_budget,
            out=a.out,
            report=a.report,
            markdown=a.markdown,
            html=a.html,
            device=a.device,
            prebuild=a.prebuild,
            isolate=a.isolate,
            timeout=a.timeout,
            compile_timeout=a.compile_timeout,
            determinism=a.determinism,
            k=tuple(a.k or ()),
            standard=tuple(a.standard or ()),
            second_reference=a.second_reference,
            truth=a.truth,
            chunk_threshold=a.chunk_threshold,
            poison=not a.no_poison,
            narrow=tuple(a.narrow or ()),
            edge_cases=not a.no_edge_cases,
            db=a.db,
            quiet=a.quiet,
            seed=a.seed,
            shard=a.shard,
            threads=a.threads,
            jobs=a.jobs,
            hunt=getattr(a, "hunt", None),
            known=tuple(getattr(a, "known", None) or ()),
            max_findings=getattr(a, "max_findings", None),
            coverage=getattr(a, "coverage", None),
            values_from=getattr(a, "values_from", None),
            argv=tuple(getattr(a, "argv", None) or ()),
        )

    @property
    def names(self) -> list:
        return list(self.kernels or DEFAULT_KERNELS)

    @property
    def database(self) -> str | None:
        return None if self.db == "none" else self.db

    def run_config(self):
        """The RunConfig every case of the run is judged with."""
        # lazy: keeps torch off --help
        from difftest.judge.gates import GateConfig  # judge/ loads torch: not at `difftest --help`
        from difftest.judge.runner import RunConfig

        gates = GateConfig(k=dict(self.k), standards=_standards(self.standard))
        return RunConfig(
            gates=gates,
            device=self.device,
            poison=self.poison,
            determinism_runs=self.determinism,
            second_reference=self.second_reference,
            isolate=self.isolate,
            timeout_s=DEFAULT_TIMEOUT_S if self.timeout is None else self.timeout,
            compile_timeout_s=self.compile_timeout or DEFAULT_COMPILE_TIMEOUT_S,
            chunk_threshold=self.chunk_threshold,
            truth=self.truth,
        )


def _standards(items) -> dict:
    # lazy: keeps torch off --help
    from difftest.judge.gates import Standard  # loads torch: not at `difftest --help`

    out = {}
    for it in items or ():
        name, _, spec = it.partition(":")
        if not spec.strip():  # 'dq' alone used to become the default standard, unnoticed
            raise UsageError(f"--standard {it!r}: no SPEC: allowed OUTPUT:atol=..,rtol=..,max_abs=..,ratio=..")
        names = OUTPUTS if name == "all" else (name,)
        if name != "all" and name not in OUTPUTS:
            raise UsageError(
                f"--standard {it!r}: allowed OUTPUT:atol=..,rtol=..,max_abs=..,ratio=.. "
                f"with OUTPUT in {OUTPUTS} or 'all'"
            )
        try:
            std = Standard.parse(spec)
        except ValueError as e:
            raise UsageError(f"--standard {it!r}: {e}") from None
        for n in names:
            out[n] = std
    return out


def resumable(out, run_id: str | None) -> tuple[Run, list]:
    """The killed run ``--resume [RUN_ID]`` continues in ``out``, and its original argv."""
    try:
        run = Run.resume(out, run_id or None)
        argv = run.meta()["argv"]
    except (RunError, KeyError) as e:
        raise UsageError(str(e)) from None
    if not isinstance(argv, list) or not argv or argv[0] != "run" or not all(isinstance(x, str) for x in argv):
        raise UsageError(f"--resume {run.id}: {run.meta_path} holds no command line (argv) to resume")
    return run, argv


class RunPlan:
    """Runs the campaigns of one run (see the module docstring)."""

    def __init__(self, options: RunOptions, *, resume: Run | None = None, publish: bool = True, runs_base=None):
        self.options = options
        self.resume = resume
        self.publish = publish  # copy the reports to OUT when the run finishes (the CLI; not pytest)
        self.runs_base = Path(options.out) if runs_base is None else Path(runs_base)
        self.run: Run | None = resume
        self.jobs = 1
        self.jobs_why = ""
        self.lane_env: dict = {}  # set in each lane after the fork (its threads)
        self.lane_threads: str | None = None
        self._omp_before: str | None = None
        self._in_lanes = False
        self.config = None
        self.prebuilt: dict = {}
        self.charged: set = set()  # kernels whose prebuild wait a campaign's budget has paid
        self.records: dict = {}
        self.results: list = []
        self._known: list | None = None  # the --known entries, read once
        self.split = RunSplit()  # where the run's wall time goes (run/split.py); execute restarts it

    # ------------------------------------------------------------------ difftest run
    def execute(self) -> int:
        """The whole ``difftest run``: plan, run every campaign, write the reports; the exit code."""
        o = self.options
        self.split = RunSplit()  # from the process's start: interpreter and imports are the run's too
        claim_hypothesis_home()
        # the outputs are checked before anything starts (a worker, a lane) or is written (the
        # path as typed: --out '' is refused, not taken for the working directory)
        check_device(o.device)
        check_outputs(o.out, [("--report", o.report), ("--markdown", o.markdown), ("--html", o.html)], o.db)
        check_workdir()
        self.known_entries()  # a bad --known file: one line, exit 2, before anything starts
        names = o.names

        try:
            self.jobs, self.jobs_why = lanes.choose(o.jobs, len(names), threads.usable_cpus(), o.isolate, o.device)
        except lanes.JobsError as e:
            raise UsageError(str(e)) from None
        if self.jobs > 1 and len(set(names)) < len(names):
            self.jobs, self.jobs_why = 1, "a kernel named twice: its campaigns share one case log"
        self.share_threads(names)  # before torch loads: it reads OMP_NUM_THREADS once
        with heap.setup():  # torch and the adapters imported without the cyclic GC, then frozen
            kernels = self.load_kernels(names)
        self.open_capture(kernels)
        if self.jobs > 1:
            gpu = lanes.on_gpu(kernels, o.device)
            if gpu and self.jobs_why != "--jobs":  # auto: campaigns on one GPU share its memory; one at a time
                self.jobs, self.jobs_why = 1, f"{', '.join(gpu)} on CUDA: campaigns share the GPU, one at a time"
                self.share_threads(names)
            elif gpu:
                print(
                    f"difftest: warning: --jobs {self.jobs}: {', '.join(gpu)} run on CUDA side by side (they "
                    "share the GPU's memory and time)",
                    file=sys.stderr,
                )
            if self.jobs > 1:
                if self.lane_threads:
                    print(f"difftest: {self.lane_threads}", file=sys.stderr)
                print(f"difftest: {self.jobs} campaigns at once ({self.jobs_why})", file=sys.stderr)
        self.config = o.run_config()  # the standards import torch: after share_threads chose its threads
        if not o.isolate and (o.timeout is not None or o.compile_timeout is not None):
            print(
                "difftest: warning: --timeout needs isolation (a kernel call in this process cannot be "
                "stopped): it is ignored with --no-isolate, as is --compile-timeout",
                file=sys.stderr,
            )
        return self._run_all(kernels)

    def load_kernels(self, names) -> list:
        o = self.options
        try:
            kernels = [registry.get(n) for n in names]
            if o.second_reference:
                registry.get(o.second_reference)
        except KeyError as e:
            raise UsageError(e.args[0]) from None
        try:
            changes = parse_narrowing(list(o.narrow) or None)
            return [registry.narrow(k, **changes) for k in kernels]
        except ValueError as e:
            raise UsageError(str(e)) from None

    def open_capture(self, kernels) -> None:
        """``--values-from``: the capture, validated (a bad file, or one no kernel can take,
        is one line and exit 2 before any case runs)."""
        self.capture = None
        if self.options.values_from:
            # lazy: keeps torch off --help
            from difftest.model.capture import CaptureError, open_capture
            from difftest.strategies.values import captured_problems

            try:
                self.capture = open_capture(self.options.values_from)
                for k in kernels:
                    captured_problems(self.capture, k.capability, self.options.profile)
            except (CaptureError, ValueError) as e:
                raise UsageError(f"--values-from: {e}") from None

    def share_threads(self, names) -> None:
        """CPU threads of this process and its kernel worker(s), set before any worker starts
        (they inherit OMP_NUM_THREADS); with one campaign at a time the worker starts now.
        With ``jobs`` > 1 the lanes get the threads (``lane_env``, set in each lane after the
        fork) and this process, which only waits for them, runs single-threaded: a process
        whose OpenMP pool ever started cannot fork safely (the child hangs in it)."""
        o = self.options
        if self._in_lanes:  # back to one campaign at a time (a CUDA kernel): as if never in lanes
            if self._omp_before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = self._omp_before
            self._in_lanes, self.lane_env, self.lane_threads = False, {}, None
        try:
            n_threads, why = threads.choose(o.threads, o.shard, jobs=self.jobs)
        except threads.ThreadsError as e:
            raise UsageError(str(e)) from None
        if self.jobs > 1:
            n = threads.per_process(n_threads, isolate=True) if n_threads is not None else None
            self._omp_before, self._in_lanes = os.environ.get("OMP_NUM_THREADS"), True
            self.lane_env = {"OMP_NUM_THREADS": str(n) if n else os.environ["OMP_NUM_THREADS"]}
            os.environ["OMP_NUM_THREADS"] = "1"  # this process: torch not imported yet, so no pool ever starts
            self.lane_threads = f"{n} CPU threads per process ({why}, halved with the kernel worker)" if n else None
            return  # printed once the kernels are loaded and the lanes confirmed (execute)
        if o.isolate:
            if n_threads is None:
                share_cores()  # references here and the kernel there run at once: half the cores each
            else:  # the run's share of the host, halved the same way between this process and its worker
                n_threads, why = threads.per_process(n_threads, isolate=True), f"{why}, halved with the kernel worker"
                threads.apply(n_threads)
            prestart(names)  # (jobs is 1 here) the worker's imports (torch, the kernels' modules) run beside ours
        else:
            threads.apply(n_threads)
        torch = sys.modules.get("torch")  # imported under OMP_NUM_THREADS=1 when lanes were planned first
        if torch is not None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        if n_threads is not None:
            print(f"difftest: {n_threads} CPU threads per process ({why})", file=sys.stderr)

    # ------------------------------------------------------------------ shared by every front
    def known_entries(self) -> list:
        """The findings the ``known`` files hold (read once; a malformed file is a UsageError).
        A Problem beyond the profile's size limits (search/limits.py) is dropped with a warning,
        as the failure store's are: a gigabyte Problem from a nightly report is not replayed
        under ``quick``."""
        if self._known is None:
            try:
                entries = [k for f in self.options.known for k in load_known(f)]
            except SignatureError as e:
                raise UsageError(f"--known {e}") from None
            self._known = [dataclasses.replace(k, problems=self._within_profile(k)) for k in entries]
        return self._known

    def _within_profile(self, known) -> list:
        kept = []
        for p in known.problems:
            why = check_problem_size(p, self.options.profile)
            if why:
                print(f"difftest: warning: --known {cell(known.source)}: a problem skipped: {why}", file=sys.stderr)
            else:
                kept.append(p)
        return kept

    def open(self, argv=None, quiet: bool = False) -> Run:
        """The run folder: the resumed run's, or a new one (once). The example database is
        checked first (a link inside it: one line, nothing written; every front)."""
        if self.run is None:
            why = check_database(self.options.database, "--db") if self.options.database else None
            if why:
                raise UsageError(why)
            self.run = Run.start(self.runs_base, list(self.options.argv if argv is None else argv))
            if not quiet:
                print(f"run {self.run.id}: {self.run.dir}", file=sys.stderr, flush=True)
        return self.run

    def prebuild(self, kernels) -> dict:
        """Build the JIT kernels these campaigns start with (all at once, on every core) and
        wait for them: a campaign has a wall-clock budget, which builds beside it would
        spend. Returns kernel name -> counts."""
        todo = [k for k in kernels if k.name not in self.prebuilt]
        if not self.options.prebuild or not todo:
            return {k.name: self.prebuilt.get(k.name) for k in kernels}
        prep = warmup.start(todo, self.options.profile, self.options.database)
        lanes.yield_to_builds()  # in a lane: the build pool has forked, at the run's priority
        for k in todo:  # before the first campaign: see run/prebuild.py
            self.prebuilt[k.name] = prep.wait(k)
        return {k.name: self.prebuilt.get(k.name) for k in kernels}

    def budget_after_prebuild(self, kernel) -> float | None:
        """An explicit ``--time-budget`` less what waiting for this kernel's prebuild took, once
        per kernel: the budget bounds the whole campaign, its builds included (a TileLang campaign on a
        shared H100 waited 140 s for its builds and then took its whole 440 s besides).
        At least ``PREBUILD_FLOOR`` of the budget is left, so a campaign whose builds took it
        all still judges its first problems (docs/coverage.md, "Budgets")."""
        budget = self.options.time_budget
        built = self.prebuilt.get(kernel.name) or {}
        if budget is None or kernel.name in self.charged or not built.get("waited_s"):
            return budget  # a profile's own budget is not charged: the README's CPU job keeps its cases
        self.charged.add(kernel.name)
        return max(budget - float(built["waited_s"]), budget * PREBUILD_FLOOR)

    def campaign(self, kernel, progress: bool = False, isolate: bool | None = None, **kw):
        """One kernel's campaign in this run's folder, with the run's options, after its
        prebuild; ``kw`` overrides the options (run_campaign's keywords: the pytest
        fixture's). ``kernel``: a registry name, "module:attr" or an adapter. ``isolate``
        overrides the options' (a ``config`` in ``kw`` wins over both); an adapter instance
        without a ``spec`` cannot be rebuilt in a worker process and runs here."""
        # lazy: keeps torch off --help
        from difftest.search.campaign import run_campaign  # loads torch and Hypothesis: not at CLI start

        o = self.options
        run = self.open()
        if isinstance(kernel, str):
            kernel = registry.get(kernel)
        if "config" not in kw:
            iso = o.isolate if isolate is None else isolate
            if iso and getattr(kernel, "spec", None) is None:
                iso = False  # an unregistered instance: a worker process could not rebuild it
            base = self.config or o.run_config()
            kw["config"] = base if base.isolate == iso else dataclasses.replace(base, isolate=iso)
        self.prebuild([kernel])
        args: dict[str, Any] = dict(
            profile=o.profile,
            max_examples=o.max_examples,
            time_budget=self.budget_after_prebuild(kernel),
            shrink_budget=o.shrink_budget,
            out_dir=run.dir,
            plan_cache=run.out / PLANS,
            progress=progress,
            edge_cases=o.edge_cases,
            database=o.database,
            seed=-1 if o.seed is None else o.seed,
            shard=o.shard,
            run_id=run.id,
            resume=self.resume is not None,
            hunt=o.hunt,
            coverage=o.coverage,
        )
        if o.max_findings is not None:
            args["max_findings"] = o.max_findings
        if self.options.known:
            args["known"] = known_for(self.known_entries(), kernel)
        if getattr(self, "capture", None) is not None and "strategy" not in kw:  # --values-from
            # lazy: keeps torch off --help
            from difftest.strategies.values import captured_problems

            args.update(strategy=captured_problems(self.capture, kernel.capability, o.profile), edge_cases=False)
        args.update(kw)
        r = run_campaign(kernel, **args)
        if self.prebuilt.get(kernel.name):  # a lane's prebuild travels back with its result
            r.settings["prebuild"] = self.prebuilt[kernel.name]
        return r

    def finished(self, name: str, r) -> None:
        """Kernel ``name``'s campaign finished: judged (a campaign that checked no case is
        NOTHING_CHECKED, never passed: report/checked.py), and its record kept in the run
        folder (``--resume`` skips it)."""
        r.status = checked_status(r.status, r.cases)
        self.results.append(r)
        if self.prebuilt.get(name):
            r.settings["prebuild"] = self.prebuilt[name]
        self.records[id(r)] = campaign_record(r)  # once: the run state and report.json share it
        assert self.run is not None  # started (or resumed) before any campaign
        self.run.mark_kernel(
            name,
            {
                **self.records[id(r)],
                "case_log": r.settings.get("case_log"),
                "first_failure": r.first_failure.to_dict() if r.first_failure else None,
            },
        )

    def write_reports(self, results, interrupted: str | None, argv=None) -> Path:
        """report.json, summary.md and report.html in the run folder (the user's extra paths
        get copies), the run's status, and with ``publish`` the copies in OUT. Returns
        report.json's path."""
        o, run = self.options, self.run
        assert run is not None  # started (or resumed) before any campaign
        with deferred():  # a second signal must not cut the partial report in half
            ensure_dir(run.dir, root=run.out)  # still a real folder (no link planted since the run began)
            extra = {"argv": list(o.argv if argv is None else argv), "run_id": run.id, "interrupted": interrupted}
            text = report_text(results, extra=extra, records=self.records)
            report = atomic_write_text(run.dir / "report.json", text)
            md = run.dir / "summary.md"
            atomic_write_text(md, markdown_summary(results) + "\n")
            write_findings(results, run.dir / "findings.json")
            page = render_html(written_report(text, str(report)), title=f"difftest report: {report}")
            html = atomic_write_text(run.dir / "report.html", page)
            for path, src in ((o.report, report), (o.markdown, md), (o.html, html)):
                if path:  # the user's own paths get this run's files, finished or not
                    atomic_write_text(path, run.read(src.name).decode("utf-8", "replace"))
            run.set_status(RunStatus.INTERRUPTED if interrupted else RunStatus.FINISHED, interrupted=interrupted)
            if not interrupted and self.publish:
                run.publish()
        return report

    # ------------------------------------------------------------------ difftest run's campaigns
    def _run_all(self, kernels) -> int:
        """Run (or resume) every kernel's campaign in this run's folder; on SIGINT/SIGTERM
        keep what finished, write a partial report and exit 130/143 (1 if a failure was found)."""
        o, resume = self.options, self.resume
        out = Path(o.out)
        run = self.open(quiet=True)
        print(f"run {run.id}{' (resumed)' if resume else ''}: {run.dir}", file=sys.stderr, flush=True)
        if resume:
            crashed = record_crash(run)
            if crashed:
                print(
                    f"difftest: the killed run crashed in-process on {crashed}: recorded as an error case",
                    file=sys.stderr,
                )
        if not o.isolate:  # a crash in the kernel takes this process: faulthandler leaves its stack
            crash_log = os.fdopen(open_append(run.dir / CRASH_LOG, root=run.out), "a")
            faulthandler.enable(file=crash_log)
            print(
                f"difftest: --no-isolate: a crash's stack is written to {run.dir / CRASH_LOG}; "
                f"`--resume` records it as an error case",
                file=sys.stderr,
            )
        results = []
        interrupted, lost = None, []  # lost: campaigns whose process died (--jobs > 1, lanes.py)
        t0 = time.perf_counter()
        if self.jobs == 1 and o.prebuild and any(hasattr(k, "prepare") for k in kernels):
            self.split.enter("prebuild")
        for name, built in (self.prebuild(kernels) if self.jobs == 1 else {}).items():  # lanes: in the lane
            if built:
                print(f"{name}: prebuild {built}", flush=True)

        with interruptible():
            try:
                if self.jobs > 1:
                    got = self._side_by_side(kernels)
                    if got is None:  # one at a time after all, with the serial threads and worker
                        self.jobs = 1
                        self.share_threads([getattr(k, "spec", None) or k.name for k in kernels])
                    else:
                        results, interrupted, lost = got
                if self.jobs == 1:
                    self.split.enter("campaigns")
                for k in kernels if self.jobs == 1 else ():
                    print(claim_line(k.name, k.capability), flush=True)
                    rec = resume.finished_kernel(k.name) if resume else None
                    if rec is not None:  # finished before the kill: its record and logged cases
                        r = result_from_record(rec, logged_cases(run.dir / rec["case_log"], run.id))
                    else:
                        self.split.campaign_started(k.name)
                        try:
                            r = self.campaign(k, progress=not o.quiet)
                        except Interrupted as e:
                            interrupted = e
                            if getattr(e, "partial", None) is not None:
                                results.append(e.partial)  # type: ignore[attr-defined]  # getattr above
                            break
                        self.split.campaign_ended(k.name)
                        self.finished(k.name, r)
                    results.append(r)
                    print_campaign(k, r)
            except Interrupted as e:  # between campaigns
                interrupted = e
            finally:
                close_all()
        why = interrupted.name if interrupted else "campaign process died" if lost else None
        self.split.enter("reports")
        report = self.write_reports(results, why)
        print()
        print(summary_table(results))
        table = findings_table(results)
        if table:
            print("\nfindings (one per distinct bug):\n" + table)
        print("\n" + self.split.render())
        where = f"{out / 'report.json'} (run folder {run.dir})" if not why else f"{report} (partial)"
        print(f"\nreport: {where}  ({time.perf_counter() - t0:.1f} s)")
        failed = any(r.failed for r in results)
        if interrupted:
            print(
                f"difftest: interrupted by {interrupted.name}: partial report {report}; "
                f"continue with: difftest run --resume {run.id} --out {out}",
                file=sys.stderr,
            )
            return 1 if failed else interrupted.exit_code
        if lost:
            print(
                f"difftest: the campaign process of {', '.join(lost)} died: partial report {report}; "
                f"continue with: difftest run --resume {run.id} --out {out}",
                file=sys.stderr,
            )
            return 1
        if failed:
            return EXIT_FAILED
        if run_checked_nothing(r.status for r in results):
            print(f"difftest: {nothing_checked_line(results)}", file=sys.stderr)
            return EXIT_NOTHING_CHECKED
        return EXIT_PASSED

    def _side_by_side(self, kernels):
        """``jobs`` > 1: the campaigns in lanes (run/lanes.py). Each campaign's block prints
        when it finishes; the results keep the order the kernels were named in. Returns
        (results, the Interrupted or None, names of the campaigns whose process died), or
        None when the run cannot fork safely (``lanes.fork_hazard``): then nothing ran."""
        run, resume = self.run, self.resume
        with heap.setup():  # before the fork: once here, not once per lane and per lane's worker
            lanes.preload()
        hazard = lanes.fork_hazard()
        if hazard:  # forking now could hang a lane: the campaigns run here, one at a time
            print(f"difftest: campaigns one at a time: {hazard}, so it cannot fork safely", file=sys.stderr)
            return None
        done: dict = {}
        todo = []
        for i, k in enumerate(kernels):
            rec = resume.finished_kernel(k.name) if resume else None
            if rec is not None:  # finished before the kill: its record and logged cases
                done[i] = result_from_record(rec, logged_cases(run.dir / rec["case_log"], run.id))
                print(claim_line(k.name, k.capability), flush=True)
                print_campaign(k, done[i])
            else:
                todo.append(i)
        try:
            builds = [k.name for k in kernels if self.options.prebuild and hasattr(k, "prepare")]
            order = lanes.schedule([kernels[i].name for i in todo], lanes.previous_times(run.out), first=builds)
        except Interrupted as e:  # before any lane started: what finished before the kill is kept
            return [done[i] for i in sorted(done)], e, []

        def on_result(j, r):
            k = kernels[todo[j]]
            self.split.campaign_ended(k.name, r.settings.get("prebuild"))
            self.finished(k.name, r)
            done[todo[j]] = r
            if r.settings.get("prebuild"):
                print(f"{k.name}: prebuild {r.settings['prebuild']}", flush=True)
            print(claim_line(k.name, k.capability), flush=True)
            print_campaign(k, r)

        def on_start(j):  # one line per campaign started; its block follows when it finishes
            self.split.campaign_started(kernels[todo[j]].name)
            if not self.options.quiet:
                print(f"{kernels[todo[j]].name}: running", flush=True)

        self.split.enter("campaigns")
        out = lanes.run_lanes(
            [kernels[i] for i in todo],
            self.jobs,
            lambda k: self.campaign(k),
            on_result,
            on_start=on_start,
            order=order,
            env=self.lane_env,
            builders=builds,
        )
        for j, r in out["partial"].items():
            done[todo[j]] = r
        for j, why in out["lost"].items():  # its lane died: what its case log kept, as a partial result
            k = kernels[todo[j]]
            r = lanes.lost_result(k, self.options.profile, run, why)
            print(
                f"difftest: {k.name}: {why.splitlines()[0]}; its {len(r.cases)} logged cases are kept as a "
                f"partial result",
                file=sys.stderr,
            )
            if len(why.splitlines()) > 1:
                print(why, file=sys.stderr)
            done[todo[j]] = r
        lost = [kernels[todo[j]].name for j in sorted(out["lost"])]
        return [done[i] for i in sorted(done)], out["interrupted"], lost


def nothing_checked_line(results) -> str:
    """Why a run that checked nothing does not pass, in one line."""
    empty = [r.kernel for r in results if r.status == CampaignStatus.NOTHING_CHECKED]
    if empty:
        return (
            f"nothing checked: {', '.join(empty)} judged no case (none run, or every one skipped): a run that "
            "checks nothing does not pass; give it cases (a larger --time-budget or --max-examples, a wider "
            "--narrow)"
        )
    return "nothing checked: no kernel could run here (every one unavailable): a run that checks nothing does not pass"


def print_campaign(k, r) -> None:
    """A campaign's block on stdout: status, cases, timing, coverage, the shrunk failure;
    each line printable (``printable.block``: a reason, a signature or a path read from a
    ``--known`` file or a resumed case log reaches no terminal or CI log raw)."""
    line = f"{k.name}: {r.status} ({len(r.cases)} cases, {r.elapsed:.1f} s"
    line += f", {r.compile_keys} compile keys" if k.capability.compile_key else ""
    line += f", {r.compile_stats})" if r.compile_stats else ")"
    if r.status == CampaignStatus.UNAVAILABLE:
        line += f": {r.reason}"
    _say(line)
    if getattr(r, "timing", None) and r.cases:
        _say(render(r.timing))
    cr = getattr(r, "compile_reuse", None)
    if cr:
        _say(f"  {compile_reuse_line(cr)}")
    if r.status != CampaignStatus.UNAVAILABLE:
        missing = ", ".join(r.coverage.get("missing") or ()) or "none (every expected feature ran)"
        _say(f"  not exercised: {missing}")
        if r.coverage.get("pairs"):
            _say(f"  configuration pairs: {pair_line(r.coverage['pairs'])}")
    coverage = r.coverage if r.status != CampaignStatus.UNAVAILABLE else {}
    for note in campaign_notes(
        getattr(r, "profile", None),  # type: ignore[arg-type]  # a result's profile
        coverage,
        getattr(r, "unexplained_cases", None),
        getattr(r, "unrun", 0),
        r.cases,
    ):
        _say(f"  {note}")
    if getattr(r, "hunt", False) and r.cases:
        _say(f"  {rate_line(rates(len(r.cases), getattr(r, 'findings', None) or [], r.elapsed))}")
    for f in getattr(r, "findings", ()) if getattr(r, "hunt", False) else ():
        if isinstance(f, dict):
            continue  # a resumed campaign's record: the findings table lists them
        where = f.reproducer["json"] if f.reproducer else "replayed, not shrunk"
        _say(
            f"  finding {f.id} ({'known' if f.known else 'new'}): {f.signature.describe()}; "
            f"{f.hits} cases, first at case {f.first_seen.get('case', '-')}; reproducer: {where}"
        )
    if r.failure is not None:
        _say(r.failure.render())
        for d in getattr(r, "declaration", ()):
            _say(f"  {d}")
        _say(
            f"  first failure after {r.examples_to_fail} examples ({r.seconds_to_fail:.1f} s); "
            f"{replay_line(r.reproducer)}"
        )


def _say(text) -> None:
    print(block(text), flush=True)
