"""Race stress: many repetitions of one large call, under load, compared bit for bit.

Why: races are rare by nature. FlashAttention's own race test uses batch 60 and 250-10,000
repetitions; a PDL race in its backward preprocess corrupted dQ/dK within a few steps on
one GPU and once in 3,000+ on another. The determinism gate of a campaign calls a kernel
twice per case; a race that fires once in 100 calls passes it almost always.

What: ``stress_case`` runs one Problem ``reps`` times (``RunConfig.determinism_runs``:
every repetition is compared with the first bit for bit, and every repetition that
differs is judged by the gates like the first), optionally while ``load`` threads keep
the device busy (large matmuls on the CPU, or on a CUDA stream of their own, so the
kernel's blocks are scheduled around someone else's work as in training). A kernel that
claims determinism fails on any differing bit; one that does not (atomics) only fails
when a differing repetition is wrong by the gates, and the report says how many differed.
``stress_problems`` gives the shapes worth stressing: large batch, many heads, lengths
that leave partial tiles, causal or not.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import torch

from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.model.problem import Problem

MIN_REPS = 2


@dataclass
class StressResult:
    case: CaseResult
    reps: int
    seconds: float
    load: int  # load threads that ran beside the repetitions
    load_ops: int  # matmuls the load finished meanwhile (0: none ran)
    notes: list = field(default_factory=list)

    @property
    def reps_per_second(self) -> float:
        return self.reps / self.seconds if self.seconds > 0 else float("inf")

    @property
    def differing(self) -> dict:
        """output -> elements that differed from the first repetition in any later one."""
        return {v.output: v.numbers.get("differing", 0) for v in self.case.verdicts
                if str(getattr(v.gate, "value", v.gate)).startswith("determinism")}

    def line(self) -> str:
        diff = {k: n for k, n in self.differing.items() if n}
        return (f"{self.case.kernel} {self.case.problem.short()}: {self.case.status.value} after {self.reps} "
                f"repetitions ({self.reps_per_second:.1f}/s, {self.load} load threads, {self.load_ops} load ops); "
                f"differing elements: {diff or 'none'}")


class _Load:
    """Threads that keep ``device`` busy with matmuls until stopped."""

    def __init__(self, device: str, threads: int, size: int):
        self.device, self.size = device, size
        self.stop = threading.Event()
        self.ops = 0
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, name=f"difftest-stress-load-{i}", daemon=True)
                        for i in range(threads)]

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


def stress_case(kernel, problem: Problem, reps: int = 100, *, load: int = 1, load_size: int = 512,
                config: RunConfig | None = None) -> StressResult:
    """``kernel`` on ``problem`` ``reps`` times under ``load`` busy threads; see the module."""
    if not isinstance(reps, int) or reps < MIN_REPS:
        raise ValueError(f"reps={reps!r}: allowed an int >= {MIN_REPS}")
    if not isinstance(load, int) or load < 0:
        raise ValueError(f"load={load!r}: allowed an int >= 0")
    cfg = config or RunConfig()
    cfg = RunConfig(**{**cfg.__dict__, "determinism_runs": reps})
    device = cfg.device or kernel.capability.device
    t0 = time.perf_counter()
    if load:
        with _Load(device, load, load_size) as busy:
            case = run_case(kernel, problem, cfg)
        ops = busy.ops
    else:
        case, ops = run_case(kernel, problem, cfg), 0
    notes = [] if kernel.capability.deterministic else ["the kernel does not claim determinism: differing "
                                                        "repetitions fail only when the gates reject them"]
    return StressResult(case, reps, time.perf_counter() - t0, load, ops, notes)


def stress_problems(capability, *, batch: int = 60, heads: int = 8, seqlen: int = 257, head_dim: int | None = None,
                    dtype: str | None = None) -> list[Problem]:
    """Large-batch Problems inside ``capability`` (each field lowered to what it allows):
    non-causal and causal, square, with a partial last tile."""
    c = capability
    d = head_dim if head_dim in c.head_dims_qk else max(x for x in c.head_dims_qk if x <= 128) \
        if any(x <= 128 for x in c.head_dims_qk) else min(c.head_dims_qk)
    dt = dtype if dtype in c.dtypes else ("bfloat16" if "bfloat16" in c.dtypes else c.dtypes[0])
    b = max(1, min(batch, c.max_batch))
    h = max(1, min(heads, c.max_heads))
    s = max(c.min_seqlen_q, c.min_seqlen_k, min(seqlen, c.max_seqlen))
    s -= s % c.seqlen_multiple
    out = []
    for causal in ((False, True) if c.causal and not c.causal_required else (c.causal_required,)):
        p = Problem(batch=b, seqlen_q=s, seqlen_k=s, heads_q=h, heads_kv=h, head_dim_qk=d,
                    head_dim_v=d if d in c.v_dims else c.v_dims[0], dtype=dt, causal=causal, seed=1)
        if c.excludes(p) is None:
            out.append(p)
    return out
