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
import platform
import sys
from pathlib import Path

from difftest.report.write import text_table
from difftest.safeio import atomic_write_text, json_text
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


HEAD = ("problem", "status", "reps", "reps/s", "calls/s", "load ops", "differing (elements in reps)", "failed gates")


def rows(results) -> list[tuple]:
    out = []
    for r in results:
        diff = ", ".join(f"{k} {n} in {r.differing_reps.get(k, 0)}" for k, n in r.differing.items() if n) or "none"
        bad = ", ".join(r.case.failed_gates) or (r.case.reason.strip().splitlines() or [""])[0][:120]
        out.append(
            (
                r.case.problem.short(),
                r.case.status.value,
                f"{r.reps}/{r.asked}",
                _rate(r.reps_per_second),
                _rate(r.calls_per_second),
                str(r.load_ops),
                diff,
                bad,
            )
        )
    return out


def _rate(x: float) -> str:
    return f"{x:.2f}" if math.isfinite(x) else "-"


def render(kernel: str, problems, results) -> str:
    lines = [f"stress {kernel}: {len(results)} of {len(problems)} problems"]
    lines.append(text_table([HEAD] + rows(results)))
    for p in problems[len(results) :]:
        lines.append(f"not run (time budget): {p.short()}")
    for r in results:
        for n in r.notes:
            lines.append(f"note ({r.case.problem.short()}): {n}")
    return "\n".join(lines)


def markdown(kernel: str, problems, results, seconds: float) -> str:
    out = [
        f"# difftest stress: {kernel}",
        "",
        f"{len(results)} of {len(problems)} problems in {seconds:.1f} s. Every repetition is compared with the "
        "first bit for bit; each one that differs is judged by the gates. *reps/s*: repetitions after the first per "
        "second, comparing and judging included; *calls/s*: the same per second of waiting for the kernel alone. "
        "*differing*: per output, the elements "
        "that differed from the first repetition in any later one, and in how many repetitions.",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    out += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in rows(results)]
    out += [f"- not run (time budget): `{p.short()}`" for p in problems[len(results) :]]
    for r in results:
        if r.case.failed:
            out += ["", f"**{r.case.problem.short()}**: {r.case.status.value}", "```", r.case.render(), "```"]
    return "\n".join(out) + "\n"


def write_results(out: Path, a, kernel, problems, results, seconds: float) -> None:
    """stress.json and stress.md as they stand (after each problem: a killed stress keeps
    what finished)."""
    torch = sys.modules.get("torch")
    doc = {
        "difftest_stress": 1,
        "kernel": kernel.name,
        "host": platform.node(),
        "device": a.device or kernel.capability.device,
        "gpu": torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None,
        "reps": a.reps,
        "load_threads": a.load,
        "isolate": a.isolate,
        "seconds": round(seconds, 3),
        "problems": [p.to_dict() for p in problems],
        "results": [r.to_dict() for r in results],
        "not_run": [p.short() for p in problems[len(results) :]],
    }
    atomic_write_text(out / "stress.json", json_text(doc, indent=1))
    atomic_write_text(out / "stress.md", markdown(kernel.name, problems, results, seconds))
