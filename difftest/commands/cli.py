"""The difftest command line: ``difftest run | repro | list | new-adapter | mutants | calibrate | bench``.

Each subcommand imports what it needs when it runs (torch takes seconds to import):
``difftest --help`` and ``difftest list`` never load torch, Hypothesis or a kernel module."""

import argparse
import sys
import time
from pathlib import Path

from difftest.commands.argcheck import (
    OneLineParser,
    UsageError,
    check_device,
    check_outputs,
    k_item,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
)
from difftest.execute import adapter as registry
from difftest.execute.isolation import COMPILE_TIMEOUT_S
from difftest.model.problem import OUTPUTS
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT, WORKDIR

# The embedded default campaign: CPU kernels that run anywhere torch runs, and our
# TileLang kernel (deterministic dQ) compiled for the CPU when tilelang is installed.
DEFAULT_KERNELS = ("torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang-det")
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_COMPILE_TIMEOUT_S = COMPILE_TIMEOUT_S  # isolation's default, named once there


def _k_items(items):
    from difftest.judge.gates import DEFAULT_K

    k = dict(DEFAULT_K)
    for name, val in items or ():  # parsed and range-checked by argcheck.k_item
        k[name] = val
    return k


def _standards(items):
    from difftest.judge.gates import Standard

    out = {}
    for it in items or ():
        name, _, spec = it.partition(":")
        names = OUTPUTS if name == "all" else (name,)
        if name != "all" and name not in OUTPUTS:
            raise UsageError(f"--standard {it!r}: allowed OUTPUT:atol=..,rtol=..,max_abs=..,ratio=.. "
                             f"with OUTPUT in {OUTPUTS} or 'all'")
        try:
            std = Standard.parse(spec)
        except ValueError as e:
            raise UsageError(f"--standard {it!r}: {e}") from None
        for n in names:
            out[n] = std
    return out


def config_from_args(a):
    from difftest.judge.gates import GateConfig
    from difftest.judge.runner import RunConfig

    gates = GateConfig(k=_k_items(a.k), standards=_standards(a.standard))
    return RunConfig(gates=gates, device=a.device, poison=not a.no_poison, determinism_runs=a.determinism,
                     second_reference=a.second_reference, isolate=a.isolate,
                     timeout_s=DEFAULT_TIMEOUT_S if a.timeout is None else a.timeout,
                     compile_timeout_s=getattr(a, "compile_timeout", None) or DEFAULT_COMPILE_TIMEOUT_S,
                     chunk_threshold=a.chunk_threshold, truth=getattr(a, "truth", "float64"))


def add_run_arguments(p):
    from difftest.search.profiles import PROFILES

    p.add_argument("--kernel", "-k", action="append", dest="kernels", metavar="NAME",
                   help=f"kernel to test (repeatable; default: {', '.join(DEFAULT_KERNELS)}); see `difftest list`")
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES), help="campaign profile")
    p.add_argument("--max-examples", type=positive_int, help="generated examples per kernel (overrides the profile)")
    p.add_argument("--time-budget", type=positive_float, help="seconds of search per kernel (overrides the profile)")
    p.add_argument("--shrink-budget", type=nonneg_float,
                   help="seconds of shrinking once a failure is found (overrides the profile)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory: reports, case logs, reproducers "
                                                       f"(default {DEFAULT_OUT})")
    p.add_argument("--report", help="JSON report path (default OUT/report.json)")
    p.add_argument("--markdown", help="also write a markdown summary here (default OUT/summary.md)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument("--prebuild", action=argparse.BooleanOptionalAction, default=True,
                   help="build the JIT kernels the campaigns start with in parallel on every core, before "
                        "the first campaign (default on; difftest/run/prebuild.py)")
    p.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                   help="run kernels in a worker process so a crash or hang costs one case (default on)")
    p.add_argument("--timeout", type=positive_float, default=None,
                   help=f"seconds per kernel call before it counts as hung (default {DEFAULT_TIMEOUT_S:g}; "
                        "needs --isolate; JIT builds the adapter reports are not counted: --compile-timeout)")
    p.add_argument("--compile-timeout", type=positive_float, default=None,
                   help=f"seconds of a case's JIT builds before it counts as a build timeout, not a hang "
                        f"(default {DEFAULT_COMPILE_TIMEOUT_S:g}; needs --isolate)")
    p.add_argument("--determinism", type=positive_int, metavar="N",
                   help="calls per case for the bitwise determinism gate (default 2 for kernels claiming determinism); "
                        "every call that differs from the first is judged by the gates too")
    p.add_argument("--k", action="append", type=k_item, metavar="OUTPUT=K",
                   help="error-budget multiplier for an output")
    p.add_argument("--standard", action="append", metavar="OUTPUT:SPEC",
                   help="elementwise standard, e.g. dq:atol=1e-2,rtol=1e-2,ratio=0.999 (OUTPUT may be 'all')")
    p.add_argument("--second-reference", metavar="KERNEL", help="a second reference kernel, e.g. fa3")
    p.add_argument("--truth", choices=("float64", "float32"), default="float64",
                   help="the reference --standard is judged against (float32: autograd in float32, as teams "
                        "state their standards); the error budget always uses the float64 truth")
    p.add_argument("--chunk-threshold", type=nonneg_int, help="score elements above which the chunked oracle is used")
    p.add_argument("--no-poison", action="store_true", help="do not NaN-poison output buffers")
    p.add_argument("--narrow", action="append", metavar="FIELD=VALUES",
                   help="draw inside less than the kernel's capability, e.g. head_dims_qk=64,128 or "
                        "sinks=false (repeatable; to focus a campaign or step around a known failure)")
    p.add_argument("--no-edge-cases", action="store_true", help="skip the explicit corner-case corpus")
    p.add_argument("--db", default=DEFAULT_DB, help="Hypothesis example database directory ('none' to disable)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--seed", type=_seed, metavar="N",
                   help="fix the search (default: the profile's, 0 for quick and ci, unseeded for nightly and gpu); "
                        "a baseline and a candidate run with the same seed draw the same problems")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="run shard I of N disjoint problem streams (join the reports with `difftest merge`)")
    p.add_argument("--threads", type=_threads, metavar="N",
                   help="CPU threads of this run, halved between it and its kernel worker (0: every core). "
                        "Default: $DIFFTEST_THREADS, else an OMP_NUM_THREADS you set, else with --shard I/N the "
                        "cores divided by N (shards side by side on one host), else half the cores each "
                        "(difftest/run/threads.py)")
    p.add_argument("--jobs", "-j", type=_jobs, metavar="N",
                   help="campaigns at once, each in its own process with its own kernel worker (default auto: "
                        "one per campaign up to the usable cores on the CPU; 1 on a GPU (a CUDA kernel or "
                        "--device cuda) or with --no-isolate; 1 = one after another). Findings are the same; "
                        "blocks print as campaigns finish, reports keep the order of -k (difftest/run/lanes.py)")
    p.add_argument("--html", help="HTML report path (default OUT/report.html)")
    p.add_argument("--resume", nargs="?", const="", metavar="RUN_ID",
                   help="continue a killed or interrupted run in --out (default: the latest unfinished one) "
                        "with its original arguments, without re-running its finished cases")


def _seed(text):
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"--seed {text!r} is invalid: allowed an integer >= 0")
    return v


def _threads(text):
    from difftest.run.threads import ThreadsError, parse_threads

    try:
        return parse_threads(text)
    except ThreadsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _jobs(text):
    from difftest.run.lanes import JobsError, parse_jobs

    try:
        return parse_jobs(text)
    except JobsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shard(text):
    from difftest.search.shard import ShardError, parse_shard

    try:
        return parse_shard(text)
    except ShardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_run(a) -> int:
    from difftest.workdir import claim_hypothesis_home

    resume = None
    if a.resume is not None:  # continue a killed run with its own arguments
        from difftest.run.folder import Run, RunError

        try:
            resume = Run.resume(a.out, a.resume or None)
            argv = resume.meta()["argv"]
        except (RunError, KeyError) as e:
            raise UsageError(str(e)) from None
        a = build_parser(argv).parse_args(argv)
        a.argv = argv
    claim_hypothesis_home()

    names = a.kernels or list(DEFAULT_KERNELS)
    from difftest.run import lanes, threads

    try:
        a.jobs, jobs_why = lanes.choose(getattr(a, "jobs", None), len(names), threads.usable_cpus(), a.isolate,
                                        a.device)
    except lanes.JobsError as e:
        raise UsageError(str(e)) from None
    if a.jobs > 1 and len(set(names)) < len(names):
        a.jobs, jobs_why = 1, "a kernel named twice: its campaigns share one case log"
    _share_threads(a, names, a.jobs)  # before torch loads: it reads OMP_NUM_THREADS once
    try:
        kernels = [registry.get(n) for n in names]
        if a.second_reference:
            registry.get(a.second_reference)
    except KeyError as e:
        raise UsageError(e.args[0]) from None
    try:
        from difftest.model.capability import parse_narrowing

        changes = parse_narrowing(a.narrow)
        kernels = [registry.narrow(k, **changes) for k in kernels]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if a.jobs > 1:
        gpu = lanes.on_gpu(kernels, a.device)
        if gpu and jobs_why != "--jobs":  # auto: campaigns on one GPU share its memory; one at a time
            a.jobs, jobs_why = 1, f"{', '.join(gpu)} on CUDA: campaigns share the GPU, one at a time"
            _share_threads(a, names, 1)
        elif gpu:
            print(f"difftest: warning: --jobs {a.jobs}: {', '.join(gpu)} run on CUDA side by side (they share "
                  "the GPU's memory and time)", file=sys.stderr)
        if a.jobs > 1:
            if a.lane_threads:
                print(f"difftest: {a.lane_threads}", file=sys.stderr)
            print(f"difftest: {a.jobs} campaigns at once ({jobs_why})", file=sys.stderr)
    config = config_from_args(a)
    out = Path(a.out)
    # everything the campaign will write is checked before the first case runs
    check_device(a.device)
    check_outputs(out, [("--report", a.report), ("--markdown", a.markdown), ("--html", a.html)], a.db)
    if not a.isolate:
        if a.timeout is not None or getattr(a, "compile_timeout", None) is not None:
            print("difftest: warning: --timeout needs isolation (a kernel call in this process cannot be "
                  "stopped): it is ignored with --no-isolate, as is --compile-timeout", file=sys.stderr)
    return _run_campaigns(a, kernels, config, out, resume)


def _share_threads(a, names, jobs: int) -> None:
    """CPU threads of this process and its kernel worker(s), set before any worker starts
    (they inherit OMP_NUM_THREADS); with one campaign at a time the worker starts now.
    With ``jobs`` > 1 the lanes get the threads (``a.lane_env``, set in each lane after
    the fork) and this process, which only waits for them, runs single-threaded: a
    process whose OpenMP pool ever started cannot fork safely (the child hangs in it)."""
    import os

    from difftest.run import threads

    try:
        n_threads, why = threads.choose(getattr(a, "threads", None), a.shard, jobs=jobs)
    except threads.ThreadsError as e:
        raise UsageError(str(e)) from None
    if hasattr(a, "omp_before"):  # back to one campaign at a time (a CUDA kernel): as if never in lanes
        if a.omp_before is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = a.omp_before
        del a.omp_before
        n_threads, why = threads.choose(getattr(a, "threads", None), a.shard, jobs=jobs)
    if jobs > 1:
        n = threads.per_process(n_threads, isolate=True) if n_threads is not None else None
        a.omp_before = os.environ.get("OMP_NUM_THREADS")
        a.lane_env = {"OMP_NUM_THREADS": str(n) if n else os.environ["OMP_NUM_THREADS"]}
        os.environ["OMP_NUM_THREADS"] = "1"  # this process: torch not imported yet, so no pool ever starts
        a.lane_threads = f"{n} CPU threads per process ({why}, halved with the kernel worker)" if n else None
        return  # printed once the kernels are loaded and the lanes confirmed (cmd_run)
    if a.isolate:
        from difftest.execute.isolation import prestart, share_cores

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


def _run_campaigns(a, kernels, config, out, resume) -> int:
    """Run (or resume) every kernel's campaign in this run's folder; on SIGINT/SIGTERM
    keep what finished, write a partial report and exit 130/143 (1 if a failure was found)."""
    from difftest.execute.interrupt import Interrupted, deferred, interruptible
    from difftest.report.write import campaign_record, markdown_summary, summary_table, write_json
    from difftest.run.folder import CRASH_LOG, Run, logged_cases, record_crash, result_from_record
    from difftest.search.campaign import run_campaign

    run = resume or Run.start(out, a.argv)
    print(f"run {run.id}{' (resumed)' if resume else ''}: {run.dir}", file=sys.stderr, flush=True)
    if resume:
        crashed = record_crash(run)
        if crashed:
            print(f"difftest: the killed run crashed in-process on {crashed}: recorded as an error case",
                  file=sys.stderr)
    if not a.isolate:  # a crash in the kernel takes this process: faulthandler leaves its stack
        import faulthandler

        crash_log = (run.dir / CRASH_LOG).open("a")
        faulthandler.enable(file=crash_log)
        print(f"difftest: --no-isolate: a crash's stack is written to {run.dir / CRASH_LOG}; "
              f"`--resume` records it as an error case", file=sys.stderr)
    results, records = [], {}
    interrupted, lost = None, []  # lost: campaigns whose process died (--jobs > 1, lanes.py)
    t0 = time.perf_counter()
    from difftest.run import prebuild as warmup

    db = None if a.db == "none" else a.db
    prep = warmup.start(kernels, a.profile, db) if a.prebuild else warmup.Preparation()
    prebuilt = {k.name: prep.wait(k) for k in kernels}  # before the first campaign: see warmup.py
    for name, built in prebuilt.items():
        if built:
            print(f"{name}: prebuild {built}", flush=True)
    from difftest.judge.declaration import claim_line

    def run_one(k, progress):
        return run_campaign(k, a.profile, max_examples=a.max_examples, time_budget=a.time_budget,
                            shrink_budget=a.shrink_budget, out_dir=run.dir,
                            config=config, progress=progress, edge_cases=not a.no_edge_cases,
                            database=None if a.db == "none" else a.db,
                            seed=-1 if a.seed is None else a.seed, shard=a.shard,
                            run_id=run.id, resume=resume is not None)

    def finished(k, r):
        if prebuilt.get(k.name):
            r.settings["prebuild"] = prebuilt[k.name]
        records[id(r)] = campaign_record(r)  # once: the run state and report.json share it
        run.mark_kernel(k.name, {**records[id(r)], "case_log": r.settings.get("case_log"),
                                 "first_failure": r.first_failure.to_dict() if r.first_failure else None})

    with interruptible():
        try:
            if a.jobs > 1:
                got = _side_by_side(a, kernels, run, resume, run_one, finished)
                if got is None:  # one at a time after all, with the serial threads and worker
                    a.jobs = 1
                    _share_threads(a, [getattr(k, "spec", None) or k.name for k in kernels], 1)
                else:
                    results, interrupted, lost = got
            for k in kernels if a.jobs == 1 else ():
                print(claim_line(k.name, k.capability), flush=True)
                rec = resume.finished_kernel(k.name) if resume else None
                if rec is not None:  # finished before the kill: its record and logged cases
                    r = result_from_record(rec, logged_cases(run.dir / rec["case_log"], run.id))
                else:
                    try:
                        r = run_one(k, not a.quiet)
                    except Interrupted as e:
                        interrupted = e
                        if getattr(e, "partial", None) is not None:
                            results.append(e.partial)
                        break
                    finished(k, r)
                results.append(r)
                _print_campaign(k, r)
        except Interrupted as e:  # between campaigns
            interrupted = e
        finally:
            from difftest.execute.isolation import close_all

            close_all()
    with deferred():  # a second signal must not cut the partial report in half
        extra = {"argv": a.argv, "run_id": run.id, "interrupted": interrupted.name if interrupted else
                 "campaign process died" if lost else None}
        report = write_json(results, run.dir / "report.json", extra=extra, records=records)
        md = run.dir / "summary.md"
        from difftest.safeio import atomic_write_text

        atomic_write_text(md, markdown_summary(results) + "\n")
        html = _write_html(report, run.dir / "report.html")
        for path, src in ((a.report, report), (a.markdown, md), (a.html, html)):
            if path:  # the user's own paths get this run's files, finished or not
                atomic_write_text(path, src.read_text())
        run.set_status("interrupted" if extra["interrupted"] else "finished", interrupted=extra["interrupted"])
        if not extra["interrupted"]:
            run.publish()
    print()
    print(summary_table(results))
    where = f"{out / 'report.json'} (run folder {run.dir})" if not extra["interrupted"] else f"{report} (partial)"
    print(f"\nreport: {where}  ({time.perf_counter() - t0:.1f} s)")
    failed = any(r.failed for r in results)
    if interrupted:
        print(f"difftest: interrupted by {interrupted.name}: partial report {report}; "
              f"continue with: difftest run --resume {run.id} --out {out}", file=sys.stderr)
        return 1 if failed else interrupted.exit_code
    if lost:
        print(f"difftest: the campaign process of {', '.join(lost)} died: partial report {report}; "
              f"continue with: difftest run --resume {run.id} --out {out}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _side_by_side(a, kernels, run, resume, run_one, finished):
    """``--jobs N`` > 1: the campaigns in N lanes (difftest/run/lanes.py). Each campaign's
    block prints when it finishes; the results keep the order the kernels were named in.
    Returns (results, the Interrupted or None, names of the campaigns whose process died),
    or None when the run cannot fork safely (``lanes.fork_hazard``): then nothing ran."""
    from difftest.execute.interrupt import Interrupted
    from difftest.judge.declaration import claim_line
    from difftest.run import lanes
    from difftest.run.folder import logged_cases, result_from_record

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
            _print_campaign(k, done[i])
        else:
            todo.append(i)
    try:
        order = lanes.schedule([kernels[i].name for i in todo], lanes.previous_times(run.out / "report.json"))
    except Interrupted as e:  # before any lane started: what finished before the kill is kept
        return [done[i] for i in sorted(done)], e, []

    def on_result(j, r):
        k = kernels[todo[j]]
        finished(k, r)
        done[todo[j]] = r
        print(claim_line(k.name, k.capability), flush=True)
        _print_campaign(k, r)

    def on_start(j):  # one line per campaign started; its block follows when it finishes
        if not a.quiet:
            print(f"{kernels[todo[j]].name}: running", flush=True)

    out = lanes.run_lanes([kernels[i] for i in todo], a.jobs, lambda k: run_one(k, False),
                          on_result, on_start=on_start, order=order, env=a.lane_env)
    for j, r in out["partial"].items():
        done[todo[j]] = r
    for j, why in out["lost"].items():  # its lane died: what its case log kept, as a partial result
        k = kernels[todo[j]]
        r = lanes.lost_result(k, a.profile, run, why)
        print(f"difftest: {k.name}: {why.splitlines()[0]}; its {len(r.cases)} logged cases are kept as a "
              f"partial result", file=sys.stderr)
        if len(why.splitlines()) > 1:
            print(why, file=sys.stderr)
        done[todo[j]] = r
    lost = [kernels[todo[j]].name for j in sorted(out["lost"])]
    return [done[i] for i in sorted(done)], out["interrupted"], lost


def _print_campaign(k, r) -> None:
    line = f"{k.name}: {r.status} ({len(r.cases)} cases, {r.elapsed:.1f} s"
    line += f", {r.compile_keys} compile keys" if k.capability.compile_key else ""
    line += f", {r.compile_stats})" if r.compile_stats else ")"
    if r.status == "unavailable":
        line += f": {r.reason}"
    print(line, flush=True)
    if getattr(r, "timing", None) and r.cases:
        from difftest.execute.timing import render

        print(render(r.timing), flush=True)
    cr = getattr(r, "compile_reuse", None)
    if cr:
        print(f"  compile reuse: {cr['reusing']}/{cr['cases']} cases ({100 * cr['fraction']:.0f}%) reused one "
              f"of {cr['configurations']} compiled configurations", flush=True)
    if r.status != "unavailable":
        missing = ", ".join(r.coverage.get("missing") or ()) or "none (every expected feature ran)"
        print(f"  not exercised: {missing}")
        if r.coverage.get("beyond_profile"):
            print(f"  claimed but beyond profile {r.profile}: {'; '.join(r.coverage['beyond_profile'])}")
    if getattr(r, "unrun", 0):
        print(f"  search budget spent: {r.unrun} drawn problems not run (a larger --time-budget runs them)")
    if r.failure is not None:
        print(r.failure.render())
        for d in getattr(r, "declaration", ()):
            print(f"  {d}")
        print(f"  first failure after {r.examples_to_fail} examples ({r.seconds_to_fail:.1f} s); "
              f"shrunk reproducer: {r.reproducer['json']} (replay: difftest repro FILE; "
              f"standalone: python {r.reproducer['py']})")


def _write_html(report_path, html_path):
    from difftest.report.html import render_html
    from difftest.report.read import load_report, write_text_atomic

    return write_text_atomic(html_path, render_html(load_report(report_path), title=f"difftest report: {report_path}"))


def cmd_repro(a) -> int:
    from difftest.search.reproducer import ReproducerError, replay

    try:
        r = replay(a.file, kernel=a.kernel, allow_import=a.allow_import, profile=a.profile)
    except ReproducerError as e:
        raise UsageError(str(e)) from None
    print(r.render(verbose=True))
    return 1 if r.failed else 0


def cmd_list(a) -> int:
    """Kernel names with where they come from; ``--check`` loads each adapter (imports
    torch and the kernel's packages) to say whether it can run here and what it claims."""
    head = ("KERNEL", "ADAPTER (module:attr)") + (("RUNS HERE", "DEVICE", "DTYPES", "DETERMINISTIC") if a.check else ())
    rows = []
    for n in registry.names():
        target = registry.describe(n)
        if not a.check:
            rows.append((n, target))
            continue
        try:
            k = registry.get(n)
            why = k.available()
            c = k.capability
            rows.append((n, target, "yes" if why is None else f"no: {why}", c.device, ",".join(c.dtypes),
                         "yes" if c.deterministic else ""))
        except Exception as e:  # a broken third-party adapter must not hide the others
            rows.append((n, target, f"no: {type(e).__name__}: {e}", "", "", ""))
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(x.ljust(w[i]) for i, x in enumerate(r)).rstrip())
    if not a.check:
        print("\n(`difftest list --check` loads each adapter: whether it runs here, device, dtypes)")
    return 0


# subcommand -> module, where they differ
_MODULES = {"calibrate": "calibration", "report": "html_report", "variants": ".measure.variants"}
def cmd_new_adapter(a) -> int:
    from difftest.commands.scaffold import write_skeleton

    try:
        root = write_skeleton(a.name, a.dir)
    except (ValueError, FileExistsError) as e:
        print(f"difftest: {e}", file=sys.stderr)
        return 2
    print(f"wrote {root}/ (adapter, capability, pyproject.toml entry point, a pytest test)\n"
          f"next: pip install --no-build-isolation -e {root} && difftest run -k {a.name} -p quick")
    return 0


# name -> (help, module holding add_arguments/command or None for the ones defined here)
COMMANDS = {
    "run": "run property campaigns against kernels",
    "repro": "replay a .json reproducer (the .py is run with python, never by difftest)",
    "list": "list known kernels (--check: whether they can run here)",
    "new-adapter": "write a skeleton adapter package for your own kernel",
    "mutants": "run the mutant catalogue (detection power)",
    "variants": "run the correct-variant catalogue (false alarms)",
    "calibrate": "measure k_needed over correct kernels",
    "bench": "time kernels' backward (CUDA events); --oracle: the float64 truth next to FA3",
    "merge": "join reports (the shards of a campaign) into one",
    "gate": "compare a candidate report with a baseline (CI gating)",
    "report": "render a report.json (HTML)",
}


def _fill(name: str, sp) -> None:
    """Arguments of subcommand ``name`` (only the chosen one is built: each may import heavy modules)."""
    if name == "run":
        add_run_arguments(sp)
        sp.set_defaults(func=cmd_run)
    elif name == "repro":
        from difftest.strategies.profiles import PROFILES

        sp.add_argument("file", help="a .json reproducer written by difftest")
        sp.add_argument("--kernel", help="run it against another kernel (e.g. the fixed one)")
        sp.add_argument("--allow-import", action="store_true",
                        help="trust a 'module:attr' kernel named in the file (imports that module)")
        sp.add_argument("--profile", "-p", choices=sorted(PROFILES),
                        help="size limits the problem must fit (default: the largest profile's)")
        sp.set_defaults(func=cmd_repro)
    elif name == "list":
        sp.add_argument("--check", action="store_true",
                        help="load every adapter: whether it can run here, device, dtypes (imports torch)")
        sp.set_defaults(func=cmd_list)
    elif name == "new-adapter":
        sp.add_argument("name", help="kernel name (the package is the name with '-' as '_')")
        sp.add_argument("--dir", default=".", help="folder to create the package in (default: here)")
        sp.set_defaults(func=cmd_new_adapter)
    else:
        import importlib

        mod = importlib.import_module(f".{_MODULES.get(name, name)}", __package__)
        mod.add_arguments(sp)
        sp.set_defaults(func=mod.command)


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` (default: all of them) gets its
    arguments, so ``difftest --help`` imports nothing heavy."""
    p = OneLineParser(prog="difftest", description=__doc__.split("\n\n")[0],
                                epilog=f"working folder: {WORKDIR}/ (outputs, failure store, "
                                       f"Hypothesis data); add it to .gitignore")
    sub = p.add_subparsers(dest="command", required=True)
    chosen = [a for a in (argv or []) if a in COMMANDS][:1] if argv is not None else list(COMMANDS)
    for name, help_ in COMMANDS.items():
        sp = sub.add_parser(name, help=help_)
        if name in chosen:
            _fill(name, sp)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    args.argv = argv
    try:
        return args.func(args)
    except (UsageError, registry.KernelSpecError) as e:
        print(f"difftest: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
