"""``difftest stress``: race stress from the command line, each problem in the isolation worker,
results written per problem (difftest/investigate/stress.py, difftest/judge/stress.py)."""

import sys
import time

from difftest.argcheck import bounded, check_device, check_outputs, positive_float
from difftest.commands.options import add_isolation_arguments
from difftest.errors import EXIT_FAILED, EXIT_PASSED, EXIT_SKIPPED, UsageError, exception_text
from difftest.execute import adapter as registry
from difftest.execute.isolation import close_all, share_cores
from difftest.investigate.stress import (
    DEFAULT_BATCH,
    DEFAULT_HEADS,
    DEFAULT_LOAD,
    DEFAULT_OUT,
    DEFAULT_REPS,
    DEFAULT_SEQLEN,
    LOAD_SIZE,
    MAX_BATCH,
    MAX_CHUNK_MIB,
    MAX_HEADS,
    MAX_LOAD,
    MAX_LOAD_SIZE,
    MAX_REPS,
    MAX_SEQLEN,
    render,
    write_results,
)
from difftest.model.problem import DTYPES, MAX_HEAD_DIM
from difftest.run.plan import DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_TIMEOUT_S
from difftest.safeio import ensure_dir
from difftest.search.limits import check_problem_size
from difftest.search.reproducer import ReproducerError, device_profile, load, load_before
from difftest.vocab import Status

HELP = "race stress: one large call repeated (100x) under load, every repetition compared bit for bit"


def add_arguments(p) -> None:
    reps = bounded(int, 2, False, MAX_REPS, "repetitions per problem", "reps_int", "``--reps``")
    load = bounded(int, 0, False, MAX_LOAD, "busy threads", "load_int", "``--load``")
    size = bounded(int, 1, False, MAX_LOAD_SIZE, "the load's matmul side", "load_size_int", "``--load-size``")
    batch = bounded(int, 1, False, MAX_BATCH, "sequences per problem", "batch_int", "``--batch``")
    heads = bounded(int, 1, False, MAX_HEADS, "query heads", "heads_int", "``--heads``")
    seqlen = bounded(int, 1, False, MAX_SEQLEN, "tokens per sequence", "seqlen_int", "``--seqlen``")
    hd = bounded(int, 1, False, MAX_HEAD_DIM, "the largest head dim", "head_dim_int", "``--head-dim``")
    p.add_argument("--kernel", "-k", required=True, help="the kernel to stress (see `difftest list`)")
    p.add_argument(
        "--problem",
        action="append",
        metavar="FILE.json",
        help="stress the Problem of this .json reproducer instead of the drawn stress problems "
        "(repeatable; only its Problem is read: the kernel is -k)",
    )
    p.add_argument(
        "--reps",
        type=reps,
        default=DEFAULT_REPS,
        help=f"repetitions of each problem, all compared bit for bit with the first "
        f"(default {DEFAULT_REPS}, at most {MAX_REPS})",
    )
    p.add_argument(
        "--load",
        type=load,
        default=DEFAULT_LOAD,
        help=f"threads keeping the device busy with matmuls meanwhile (default {DEFAULT_LOAD}; 0: none; "
        f"at most {MAX_LOAD}); on CUDA each on its own stream, in this process (the kernel's "
        "worker is another process: --no-isolate puts them in the kernel's)",
    )
    p.add_argument(
        "--load-size", type=size, help="the load's square matmul side (default 4096 on CUDA, 256 on the CPU)"
    )
    p.add_argument(
        "--batch",
        type=batch,
        help=f"batch of the stress problems (default {DEFAULT_BATCH}, as "
        f"FlashAttention's race test; the capability's max_batch caps it)",
    )
    p.add_argument("--heads", type=heads, help=f"heads of the stress problems (default {DEFAULT_HEADS})")
    p.add_argument(
        "--seqlen",
        type=seqlen,
        help=f"sequence length of the stress problems (default {DEFAULT_SEQLEN}: a partial last tile)",
    )
    p.add_argument("--head-dim", type=hd, help="head dim of the stress problems (default: the largest declared <= 128)")
    p.add_argument("--dtype", choices=DTYPES, help="dtype of the stress problems (default bfloat16 where declared)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for stress.json and stress.md (default {DEFAULT_OUT})")
    p.add_argument(
        "--time-budget",
        type=positive_float,
        help="seconds: no problem starts after this (the problems left are listed as not run)",
    )
    add_isolation_arguments(p, "problem", DEFAULT_TIMEOUT_S, DEFAULT_COMPILE_TIMEOUT_S)
    chunk = bounded(int, 1, False, MAX_CHUNK_MIB, "MiB", "chunk_mib_int", "``--chunk-mib``")
    p.add_argument(
        "--chunk-mib",
        type=chunk,
        default=1024,
        help="MiB of repetitions' outputs fetched and compared at once (default 1024)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no line per problem on stderr")


def _problems(a, kernel) -> list:
    """The Problems to stress: the reproducers' (checked as ``difftest repro`` checks
    them), else the stress problems of the capability with the flags given."""
    # lazy: keeps torch off --help
    from difftest.judge.stress import stress_problems

    shape_flags = [
        f"--{n.replace('_', '-')}"
        for n in ("batch", "heads", "seqlen", "head_dim", "dtype")
        if getattr(a, n) is not None
    ]
    if a.problem:
        if shape_flags:
            raise UsageError(
                f"{', '.join(shape_flags)}: shape the drawn stress problems, not a --problem file's: "
                "allowed either --problem FILE or the shape flags"
            )

        out = []
        for path in a.problem:
            _, problem, cfg = load(path)
            why = check_problem_size(problem, device_profile(kernel, {"device": a.device}))
            if why:
                raise ReproducerError(f"reproducer {path!r}: {why}")
            before = load_before(path)
            if before:  # a history-dependent failure: alone, its Problem passes (difftest repro runs them first)
                print(
                    f"note: reproducer {path!r} fails only after {len(before)} other Problem"
                    f"{'s' * (len(before) != 1)} ran in the same process (its 'before'); stress runs its "
                    "Problem alone, so a pass here says nothing of that failure: replay it with difftest repro",
                    file=sys.stderr,
                )
            out.append(problem)
        return out
    c = kernel.capability
    if a.dtype is not None and a.dtype not in c.dtypes:
        raise UsageError(f"--dtype {a.dtype}: {kernel.name} does not declare it: allowed {', '.join(c.dtypes)}")
    if a.head_dim is not None and a.head_dim not in c.head_dims_qk:
        dims = ", ".join(map(str, c.head_dims_qk[:20])) + (" ..." if len(c.head_dims_qk) > 20 else "")
        raise UsageError(
            f"--head-dim {a.head_dim}: {kernel.name} does not declare it: allowed one of its head_dims_qk ({dims})"
        )
    out = stress_problems(
        c,
        batch=a.batch or DEFAULT_BATCH,
        heads=a.heads or DEFAULT_HEADS,
        seqlen=a.seqlen or DEFAULT_SEQLEN,
        head_dim=a.head_dim,
        dtype=a.dtype,
    )
    if not out:
        raise UsageError(
            f"no stress problem of {kernel.name} fits its capability with these flags: allowed "
            "other --seqlen/--heads/--head-dim, or --problem FILE.json"
        )
    return out


def _error_result(kernel, problem, e, reps, load):
    """A problem whose stress raised outside the kernel's calls (a result, not the end)."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import CaseResult
    from difftest.judge.stress import StressResult

    case = CaseResult(
        kernel.name, problem, Status.ERROR, f"stress raised {exception_text(e)}", error_type=type(e).__name__
    )
    return StressResult(case, 0, 0.0, load, 0, asked=reps)


def command(a) -> int:
    # lazy: keeps torch off --help
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
                r = stress_case(
                    kernel,
                    problem,
                    a.reps,
                    load=a.load,
                    load_size=load_size,
                    config=config,
                    chunk_bytes=a.chunk_mib << 20,
                )
            except Exception as e:  # noqa: BLE001 -- recorded as this problem's result
                r = _error_result(kernel, problem, e, a.reps, a.load)
            results.append(r)
            write_results(out, a, kernel, problems, results, time.perf_counter() - t0)
            if not a.quiet:
                print(f"  [{i + 1}/{len(problems)}] {r.line()}", file=sys.stderr, flush=True)
    finally:
        close_all()
        write_results(out, a, kernel, problems, results, time.perf_counter() - t0)
    print(render(kernel.name, problems, results))
    print(f"results: {out / 'stress.json'}, {out / 'stress.md'}")
    if any(r.case.failed for r in results):
        return EXIT_FAILED
    if not any(r.reps for r in results):
        return EXIT_SKIPPED
    return EXIT_PASSED
