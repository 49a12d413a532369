"""Race stress: many repetitions of one large call, under load, compared bit for bit.

Why: races are rare by nature. FlashAttention's own race test uses batch 60 and 250-10,000
repetitions; a PDL race in its backward preprocess corrupted dQ/dK within a few steps on
one GPU and once in 3,000+ on another. The determinism gate of a campaign calls a kernel
twice per case; a race that fires once in 100 calls passes it almost always.

What: ``stress_case`` runs one Problem ``reps`` times: the first call is a campaign case
(``run_case``: every gate), and every later repetition is compared with the first bit for
bit and, when it differs in any bit, judged by the same gates (``determinism.RunTally``,
the tally the campaign's determinism gate uses). Repetitions arrive in chunks of at most
``CHUNK_BYTES`` of outputs and are dropped once tallied, so 10,000 repetitions of a batch-60
call hold two runs, not 10,000. With ``RunConfig.isolate`` the kernel runs in the worker
process (a crash or hang ends that problem's stress as an error, not the caller). Meanwhile
``load`` threads keep the device busy (large matmuls on the CPU, or on a CUDA stream of
their own, so the kernel's blocks are scheduled around someone else's work as in
training); isolated, the load runs in this process, so on a GPU it is a concurrent process
(time-sliced with the kernel's unless MPS is on), in-process a concurrent stream. A kernel that
claims determinism fails on any differing bit; one that does not (atomics) only fails
when a differing repetition is wrong by the gates, and the report says how many differed.
``stress_problems`` gives the shapes worth stressing: large batch, many heads, lengths
that leave partial tiles, causal or not.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass, field

import torch

from difftest.errors import InputError, exception_text
from difftest.execute.isolation import shared_worker
from difftest.judge.determinism import RunTally
from difftest.judge.runner import CaseParts, CaseResult, RunConfig, call_kernel, error_type, run_case
from difftest.model.problem import Problem
from difftest.vocab import Status

MIN_REPS = 2


CHUNK_BYTES = 1 << 30  # outputs of the repetitions fetched at once (a chunk): at most this, at least one run


@dataclass
class StressResult:
    case: CaseResult
    reps: int  # repetitions that ran (fewer than asked when the kernel failed to return one)
    seconds: float
    load: int  # load threads that ran beside the repetitions
    load_ops: int  # matmuls the load finished meanwhile (0: none ran)
    notes: list = field(default_factory=list)
    call_seconds: float = 0.0  # of ``seconds``, waiting for repetitions 2.. (worker round trips included)
    first_seconds: float = 0.0  # of ``seconds``, the first repetition as a campaign case (start, build, references)
    asked: int = 0  # repetitions asked for

    @property
    def reps_per_second(self) -> float:
        """Repetitions after the first per second, comparing and judging included (the first
        is left out: it starts the worker, builds a JIT kernel, computes the references)."""
        rest = self.seconds - self.first_seconds
        return (self.reps - 1) / rest if self.reps > 1 and rest > 0 else float("nan")

    @property
    def calls_per_second(self) -> float:
        """Repetitions after the first per second of waiting for the kernel alone (its
        calls and the outputs' way back; no comparing, no judging)."""
        return (self.reps - 1) / self.call_seconds if self.reps > 1 and self.call_seconds > 0 else float("nan")

    def _determinism(self) -> dict:
        return {
            v.output: v for v in self.case.verdicts if str(getattr(v.gate, "value", v.gate)).startswith("determinism")
        }

    @property
    def differing(self) -> dict:
        """output -> elements that differed from the first repetition in any later one."""
        return {k: v.numbers.get("differing", 0) for k, v in self._determinism().items()}

    @property
    def differing_reps(self) -> dict:
        """output -> later repetitions in which it differed from the first in some bit."""
        return {k: v.numbers.get("differing_runs", 0) for k, v in self._determinism().items()}

    def line(self) -> str:
        diff = {k: f"{n} elements in {self.differing_reps.get(k, 0)} reps" for k, n in self.differing.items() if n}
        return (
            f"{self.case.kernel} {self.case.problem.short()}: {self.case.status.value} after {self.reps} "
            f"repetitions ({self.reps_per_second:.1f}/s after the first, {self.load} load threads, "
            f"{self.load_ops} load ops); "
            f"differing: {diff or 'none'}"
        )

    def to_dict(self) -> dict:
        return {
            "kernel": self.case.kernel,
            "problem": self.case.problem.to_dict(),
            "short": self.case.problem.short(),
            "status": self.case.status.value,
            "reps": self.reps,
            "reps_asked": self.asked,
            "seconds": round(self.seconds, 4),
            "first_seconds": round(self.first_seconds, 4),
            "call_seconds": round(self.call_seconds, 4),
            "reps_per_second": _finite(self.reps_per_second),
            "calls_per_second": _finite(self.calls_per_second),
            "load_threads": self.load,
            "load_ops": self.load_ops,
            "differing": {k: {"elements": n, "reps": self.differing_reps.get(k, 0)} for k, n in self.differing.items()},
            "notes": self.notes,
            "case": self.case.to_dict(),
        }


def _finite(x: float):
    return round(x, 3) if math.isfinite(x) else None


class _Load:
    """Threads that keep ``device`` busy with matmuls until stopped."""

    def __init__(self, device: str, threads: int, size: int):
        self.device, self.size = device, size
        self.stop = threading.Event()
        self.ops = 0
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._work, name=f"difftest-stress-load-{i}", daemon=True) for i in range(threads)
        ]

    def _work(self):
        dev = torch.device(self.device)
        stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
        ctx = torch.cuda.stream(stream) if stream is not None else _nothing()
        with ctx:
            a = torch.randn(self.size, self.size, device=dev)
            while not self.stop.is_set():
                a = torch.tanh(a @ a.T)
                if stream is not None:
                    stream.synchronize()
                with self._lock:
                    self.ops += 1

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_bytes(problem: Problem) -> int:
    """Bytes of one repetition's outputs (O, LSE, dQ, dK, dV; an upper bound for others)."""
    item = {"float32": 4}.get(problem.dtype, 2)
    q = problem.total_q * problem.heads_q
    k = problem.total_k * problem.heads_kv
    return (
        item * (q * (problem.head_dim_qk + problem.head_dim_v) + k * (problem.head_dim_qk + problem.head_dim_v))
        + 4 * q
        + 8 * problem.heads_q
    )


def _repetitions(kernel, problem: Problem, cfg: RunConfig, parts: CaseParts, n: int) -> list:
    """``n`` more calls of the kernel on the Problem's inputs, in the worker or here."""
    # run_case set them with parts.judge
    assert parts.inputs is not None and parts.device is not None and parts.poison is not None
    if cfg.isolate:
        return shared_worker().run(
            getattr(kernel, "spec", None) or kernel.name,
            problem,
            parts.device,
            parts.poison,
            n,
            cfg.timeout_s * n,
            compile_timeout_s=cfg.compile_timeout_s,
        )
    return call_kernel(kernel, problem, parts.inputs, parts.device, parts.poison, n, cfg)


def stress_case(
    kernel,
    problem: Problem,
    reps: int = 100,
    *,
    load: int = 1,
    load_size: int = 512,
    config: RunConfig | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> StressResult:
    """``kernel`` on ``problem`` ``reps`` times under ``load`` busy threads; see the module."""
    if not isinstance(reps, int) or reps < MIN_REPS:
        raise InputError(f"reps={reps!r}: allowed an int >= {MIN_REPS}")
    if not isinstance(load, int) or load < 0:
        raise InputError(f"load={load!r}: allowed an int >= 0")
    cfg = dataclasses.replace(config or RunConfig(), determinism_runs=1)
    device = cfg.device or kernel.capability.device
    chunk = max(1, min(reps - 1, chunk_bytes // max(1, run_bytes(problem))))
    t0 = time.perf_counter()
    busy = _Load(device, load, load_size) if load else _nothing()
    done, waited = 0, 0.0
    with busy:
        parts = CaseParts()
        case = run_case(kernel, problem, cfg, parts=parts)
        first = time.perf_counter() - t0
        if parts.judge is not None:  # the kernel ran and its first repetition was judged
            done = 1
            tally = RunTally(problem, parts.first, parts.judge)
            while done < reps:
                n = min(chunk, reps - done)
                t1 = time.perf_counter()
                try:
                    outs = _repetitions(kernel, problem, cfg, parts, n)
                except Exception as e:  # a crash, hang or error of a later repetition: this problem's result
                    case.status, case.error_type = Status.ERROR, error_type(e)
                    case.reason = f"repetition {done + 1}..{done + n} of {reps}: {exception_text(e)}"
                    break
                finally:
                    waited += time.perf_counter() - t1
                for out in outs:
                    tally.add(out)
                done += n
                del outs
            case.verdicts += tally.verdicts(claimed=kernel.capability.deterministic)
            failing = {v.label for v in case.verdicts if not v.passed}
            case.verdicts += [v for v in tally.rerun_verdicts() if v.label not in failing]
            if case.status == Status.PASSED and any(not v.passed for v in case.verdicts):
                case.status = Status.FAILED
    ops = getattr(busy, "ops", 0)
    notes = (
        []
        if kernel.capability.deterministic
        else ["the kernel does not claim determinism: differing repetitions fail only when the gates reject them"]
    )
    if done:
        notes.append(f"{tally.judged} differing repetitions judged by the gates, {tally.failing_reruns} failed")
    return StressResult(
        case, done, time.perf_counter() - t0, load, ops, notes, call_seconds=waited, asked=reps, first_seconds=first
    )


def stress_problems(
    capability,
    *,
    batch: int = 60,
    heads: int = 8,
    seqlen: int = 257,
    head_dim: int | None = None,
    dtype: str | None = None,
) -> list[Problem]:
    """Large-batch Problems inside ``capability`` (each field lowered to what it allows):
    non-causal and causal, square, with a partial last tile."""
    c = capability
    d = (
        head_dim
        if head_dim in c.head_dims_qk
        else max(x for x in c.head_dims_qk if x <= 128)
        if any(x <= 128 for x in c.head_dims_qk)
        else min(c.head_dims_qk)
    )
    dt = dtype if dtype in c.dtypes else ("bfloat16" if "bfloat16" in c.dtypes else c.dtypes[0])
    b = max(1, min(batch, c.max_batch))
    h = max(1, min(heads, c.max_heads))
    s = max(c.min_seqlen_q, c.min_seqlen_k, min(seqlen, c.max_seqlen))
    s -= s % c.seqlen_multiple
    out = []
    for causal in (False, True) if c.causal and not c.causal_required else (c.causal_required,):
        p = Problem(
            batch=b,
            seqlen_q=s,
            seqlen_k=s,
            heads_q=h,
            heads_kv=h,
            head_dim_qk=d,  # type: ignore[arg-type]
            head_dim_v=d if d in c.v_dims else c.v_dims[0],  # type: ignore[arg-type]
            dtype=dt,  # type: ignore[arg-type]
            causal=causal,
            seed=1,
        )  # (d and dt: a value found in the capability's lists, never None)
        if c.excludes(p) is None:
            out.append(p)
    return out
