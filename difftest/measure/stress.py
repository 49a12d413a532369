"""``difftest stress -k KERNEL``: race stress from the command line (judge/stress.py does the work).

Each Problem (``stress_problems`` of the kernel's capability: batch 60, causal and not, a
partial last tile; or the Problems of reproducers given with ``--problem FILE.json``) runs
``--reps`` times under ``--load`` busy threads. The first repetition is judged by every gate;
every later one is compared with it bit for bit, and each one that differs in any bit is
judged by the same gates. A kernel that claims determinism fails on one differing bit in
any repetition; one that does not (atomics) fails only when a differing repetition is wrong.

The kernel runs in the campaign's isolation worker (``--isolate``, default on): a crash or
hang is that problem's result (status ``error``) and the next problem runs in a fresh
worker. Results are written after each problem (``OUT/stress.json``, ``OUT/stress.md``):
per problem the status, repetitions per second (all of it, and waiting for the kernel
alone), the load's finished matmuls, and per output the elements that differed and in how
many repetitions. ``--time-budget`` stops between problems.

Exit 0 when every problem passed, 1 when one failed (a gate, an error, a crash, a hang),
2 for bad input, 3 when nothing ran (every problem skipped: outside the capability).
"""

import math
import sys
import time
from pathlib import Path

from difftest.errors import EXIT_FAILED, EXIT_PASSED, EXIT_SKIPPED, UsageError
from difftest.safeio import ensure_dir
from difftest.workdir import WORKDIR

DEFAULT_OUT = f"{WORKDIR}/stress"
DEFAULT_REPS, DEFAULT_LOAD, DEFAULT_BATCH, DEFAULT_HEADS, DEFAULT_SEQLEN = 100, 1, 60, 8, 257
MAX_REPS = 100_000
MAX_LOAD = 64  # busy threads
MAX_LOAD_SIZE = 16384  # the load's square matmul side
MAX_BATCH = 4096
MAX_HEADS = 1024
MAX_SEQLEN = 1 << 20
MAX_CHUNK_MIB = 1 << 20  # a TiB
LOAD_SIZE = {"cuda": 4096, "cpu": 256}  # default matmul side of the load per device


def add_arguments(p) -> None:
    from difftest.commands.argcheck import _bounded, add_isolation_arguments, positive_float
    from difftest.model.problem import DTYPES, MAX_HEAD_DIM
    from difftest.run.plan import DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_TIMEOUT_S

    reps = _bounded(int, 2, False, MAX_REPS, "repetitions per problem", "reps_int", "``--reps``")
    load = _bounded(int, 0, False, MAX_LOAD, "busy threads", "load_int", "``--load``")
    size = _bounded(int, 1, False, MAX_LOAD_SIZE, "the load's matmul side", "load_size_int", "``--load-size``")
    batch = _bounded(int, 1, False, MAX_BATCH, "sequences per problem", "batch_int", "``--batch``")
    heads = _bounded(int, 1, False, MAX_HEADS, "query heads", "heads_int", "``--heads``")
    seqlen = _bounded(int, 1, False, MAX_SEQLEN, "tokens per sequence", "seqlen_int", "``--seqlen``")
    hd = _bounded(int, 1, False, MAX_HEAD_DIM, "the largest head dim", "head_dim_int", "``--head-dim``")
    p.add_argument("--kernel", "-k", required=True, help="the kernel to stress (see `difftest list`)")
    p.add_argument("--problem", action="append", metavar="FILE.json",
                   help="stress the Problem of this .json reproducer instead of the drawn stress problems "
                        "(repeatable; only its Problem is read: the kernel is -k)")
    p.add_argument("--reps", type=reps, default=DEFAULT_REPS,
                   help=f"repetitions of each problem, all compared bit for bit with the first "
                        f"(default {DEFAULT_REPS}, at most {MAX_REPS})")
    p.add_argument("--load", type=load, default=DEFAULT_LOAD,
                   help=f"threads keeping the device busy with matmuls meanwhile (default {DEFAULT_LOAD}; 0: none; "
                        f"at most {MAX_LOAD}); on CUDA each on its own stream, in this process (the kernel's "
                        "worker is another process: --no-isolate puts them in the kernel's)")
    p.add_argument("--load-size", type=size, help="the load's square matmul side (default 4096 on CUDA, 256 on "
                                                  "the CPU)")
    p.add_argument("--batch", type=batch, help=f"batch of the stress problems (default {DEFAULT_BATCH}, as "
                                               f"FlashAttention's race test; the capability's max_batch caps it)")
    p.add_argument("--heads", type=heads, help=f"heads of the stress problems (default {DEFAULT_HEADS})")
    p.add_argument("--seqlen", type=seqlen, help=f"sequence length of the stress problems (default {DEFAULT_SEQLEN}: "
                                                 "a partial last tile)")
    p.add_argument("--head-dim", type=hd, help="head dim of the stress problems (default: the largest declared <= 128)")
    p.add_argument("--dtype", choices=DTYPES, help="dtype of the stress problems (default bfloat16 where declared)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for stress.json and stress.md (default {DEFAULT_OUT})")
    p.add_argument("--time-budget", type=positive_float,
                   help="seconds: no problem starts after this (the problems left are listed as not run)")
    add_isolation_arguments(p, "problem", DEFAULT_TIMEOUT_S, DEFAULT_COMPILE_TIMEOUT_S)
    chunk = _bounded(int, 1, False, MAX_CHUNK_MIB, "MiB", "chunk_mib_int", "``--chunk-mib``")
    p.add_argument("--chunk-mib", type=chunk,
                   default=1024, help="MiB of repetitions' outputs fetched and compared at once (default 1024)")
    p.add_argument("--quiet", "-q", action="store_true", help="no line per problem on stderr")


def _problems(a, kernel) -> list:
    """The Problems to stress: the reproducers' (checked as ``difftest repro`` checks
    them), else the stress problems of the capability with the flags given."""
    from difftest.judge.stress import stress_problems

    shape_flags = [f"--{n.replace('_', '-')}" for n in ("batch", "heads", "seqlen", "head_dim", "dtype")
                   if getattr(a, n) is not None]
    if a.problem:
        if shape_flags:
            raise UsageError(f"{', '.join(shape_flags)}: shape the drawn stress problems, not a --problem file's: "
                             "allowed either --problem FILE or the shape flags")
        from difftest.search.limits import check_problem_size
        from difftest.search.reproducer import ReproducerError, device_profile, load

        out = []
        for path in a.problem:
            _, problem, cfg = load(path)
            why = check_problem_size(problem, device_profile(kernel, {"device": a.device}))
            if why:
                raise ReproducerError(f"reproducer {path!r}: {why}")
            out.append(problem)
        return out
    c = kernel.capability
    if a.dtype is not None and a.dtype not in c.dtypes:
        raise UsageError(f"--dtype {a.dtype}: {kernel.name} does not declare it: allowed {', '.join(c.dtypes)}")
    if a.head_dim is not None and a.head_dim not in c.head_dims_qk:
        dims = ", ".join(map(str, c.head_dims_qk[:20])) + (" ..." if len(c.head_dims_qk) > 20 else "")
        raise UsageError(f"--head-dim {a.head_dim}: {kernel.name} does not declare it: allowed one of its "
                         f"head_dims_qk ({dims})")
    out = stress_problems(c, batch=a.batch or DEFAULT_BATCH, heads=a.heads or DEFAULT_HEADS,
                          seqlen=a.seqlen or DEFAULT_SEQLEN, head_dim=a.head_dim, dtype=a.dtype)
    if not out:
        raise UsageError(f"no stress problem of {kernel.name} fits its capability with these flags: allowed "
                         "other --seqlen/--heads/--head-dim, or --problem FILE.json")
    return out


def _error_result(kernel, problem, e, reps, load):
    """A problem whose stress raised outside the kernel's calls (a result, not the end)."""
    from difftest.errors import exception_text
    from difftest.judge.runner import CaseResult
    from difftest.judge.stress import StressResult
    from difftest.vocab import Status

    case = CaseResult(kernel.name, problem, Status.ERROR, f"stress raised {exception_text(e)}",
                      error_type=type(e).__name__)
    return StressResult(case, 0, 0.0, load, 0, asked=reps)


def command(a) -> int:
    from difftest.commands.argcheck import check_device, check_outputs
    from difftest.execute import adapter as registry
    from difftest.execute.isolation import close_all, share_cores
    from difftest.judge.runner import RunConfig
    from difftest.judge.stress import stress_case

    check_device(a.device)
    check_outputs(out=a.out)
    try:
        kernel = registry.get(a.kernel)
    except registry.KernelSpecError as e:
        raise UsageError(f"-k {a.kernel!r}: {e}") from None
    why = kernel.available()
    if why:
        raise UsageError(f"-k {a.kernel}: cannot run here: {why}")
    problems = _problems(a, kernel)
    device = a.device or kernel.capability.device
    load_size = a.load_size or LOAD_SIZE["cuda" if str(device).startswith("cuda") else "cpu"]
    if a.isolate:
        share_cores()
    config = RunConfig(device=a.device, isolate=a.isolate, timeout_s=a.timeout, compile_timeout_s=a.compile_timeout)
    out = ensure_dir(a.out)  # no link followed where it writes (safeio)
    t0, results = time.perf_counter(), []
    try:
        for i, problem in enumerate(problems):
            if a.time_budget is not None and time.perf_counter() - t0 >= a.time_budget:
                break
            try:
                r = stress_case(kernel, problem, a.reps, load=a.load, load_size=load_size, config=config,
                                chunk_bytes=a.chunk_mib << 20)
            except Exception as e:  # noqa: BLE001 -- recorded as this problem's result
                r = _error_result(kernel, problem, e, a.reps, a.load)
            results.append(r)
            _write(out, a, kernel, problems, results, time.perf_counter() - t0)
            if not a.quiet:
                print(f"  [{i + 1}/{len(problems)}] {r.line()}", file=sys.stderr, flush=True)
    finally:
        close_all()
        _write(out, a, kernel, problems, results, time.perf_counter() - t0)
    print(render(kernel.name, problems, results))
    print(f"results: {out / 'stress.json'}, {out / 'stress.md'}")
    if any(r.case.failed for r in results):
        return EXIT_FAILED
    if not any(r.reps for r in results):
        return EXIT_SKIPPED
    return EXIT_PASSED


HEAD = ("problem", "status", "reps", "reps/s", "calls/s", "load ops", "differing (elements in reps)", "failed gates")


def rows(results) -> list[tuple]:
    out = []
    for r in results:
        diff = ", ".join(f"{k} {n} in {r.differing_reps.get(k, 0)}" for k, n in r.differing.items() if n) or "none"
        bad = ", ".join(r.case.failed_gates) or (r.case.reason.strip().splitlines() or [""])[0][:120]
        out.append((r.case.problem.short(), r.case.status.value, f"{r.reps}/{r.asked}",
                    _rate(r.reps_per_second), _rate(r.calls_per_second),
                    str(r.load_ops), diff, bad))
    return out


def _rate(x: float) -> str:
    return f"{x:.2f}" if math.isfinite(x) else "-"


def render(kernel: str, problems, results) -> str:
    from difftest.report.write import text_table

    lines = [f"stress {kernel}: {len(results)} of {len(problems)} problems"]
    lines.append(text_table([HEAD] + rows(results)))
    for p in problems[len(results):]:
        lines.append(f"not run (time budget): {p.short()}")
    for r in results:
        for n in r.notes:
            lines.append(f"note ({r.case.problem.short()}): {n}")
    return "\n".join(lines)


def markdown(kernel: str, problems, results, seconds: float) -> str:
    out = [f"# difftest stress: {kernel}", "",
           f"{len(results)} of {len(problems)} problems in {seconds:.1f} s. Every repetition is compared with the "
           "first bit for bit; each one that differs is judged by the gates. *reps/s*: repetitions after the first per "
           "second, comparing and judging included; *calls/s*: the same per second of waiting for the kernel alone. "
           "*differing*: per output, the elements "
           "that differed from the first repetition in any later one, and in how many repetitions.", "",
           "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in rows(results)]
    out += [f"- not run (time budget): `{p.short()}`" for p in problems[len(results):]]
    for r in results:
        if r.case.failed:
            out += ["", f"**{r.case.problem.short()}**: {r.case.status.value}", "```", r.case.render(), "```"]
    return "\n".join(out) + "\n"


def _write(out: Path, a, kernel, problems, results, seconds: float) -> None:
    """stress.json and stress.md as they stand (after each problem: a killed stress keeps
    what finished)."""
    import platform

    from difftest.safeio import atomic_write_text, json_text

    torch = sys.modules.get("torch")
    doc = {"difftest_stress": 1, "kernel": kernel.name, "host": platform.node(),
           "device": a.device or kernel.capability.device,
           "gpu": torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None,
           "reps": a.reps, "load_threads": a.load, "isolate": a.isolate, "seconds": round(seconds, 3),
           "problems": [p.to_dict() for p in problems], "results": [r.to_dict() for r in results],
           "not_run": [p.short() for p in problems[len(results):]]}
    atomic_write_text(out / "stress.json", json_text(doc, indent=1))
    atomic_write_text(out / "stress.md", markdown(kernel.name, problems, results, seconds))
