"""The baseline difftest must beat: a fixed parametrize grid in the style of
FlashAttention's test suite (``tests/test_flash_attn.py``), run in pytest's order under
a wall-clock budget and judged by the same gates (``runner.run_case``).

What the grid holds, and only that (FlashAttention's own test parameters):
- ``test_flash_attn_output``: dtype float16/bfloat16; MHA, MQA, GQA with batch 4 and 9
  query heads (9/1/3 key heads; FlashAttention 3's 6 heads, 6/1/2 key heads, for a
  kernel capped below 9 heads, so the grid is not skipped wholesale); head dims 32..256 including the odd 59 and 111;
  non-causal and causal (bottom-right, FlashAttention's alignment); local windows drawn
  once per cell from a fixed seed; the odd (seqlen_q, seqlen_k) pairs; N(0, 1) values,
  default softmax scale; learnable sinks on/off as FlashAttention 4's tests add.
- ``test_flash_attn_varlen_output``: the same axes with random padding masks: per
  sequence lengths in [max(1, s - 20), s] (never empty, no unused tail tokens), plus the
  (1, 147) pair.
No zero-length sequences, no top-left alignment, no head_dim_qk != head_dim_v, no value
distributions other than N(0, 1): FlashAttention's grid has none of them.

Order: pytest expands stacked ``parametrize`` decorators with the one nearest the
function varying slowest; FlashAttention lists dtype at the top and the seqlen pairs
near the bottom, so dtype varies fastest and the (seqlen_q, seqlen_k) pair slowest.
Cells a kernel's capability excludes are skipped at no cost, as pytest skips them.
"""

import random
import time
from dataclasses import dataclass, field

from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.model.problem import Problem
from difftest.vocab import Status

DTYPES = ("float16", "bfloat16")
MHA_TYPES = ("mha", "mqa", "gqa")
HEAD_DIMS = (32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256)
SEQLEN_PAIRS = (
    (113, 203),
    (128, 217),
    (113, 211),
    (108, 256),
    (256, 512),
    (512, 256),
    (1024, 1024),
    (1023, 1024),
    (1024, 1023),
    (2048, 2048),
)
VARLEN_SEQLEN_PAIRS = ((1, 147),) + SEQLEN_PAIRS
BATCH = 4
NHEADS = 9  # FlashAttention 2's tests
NHEADS_K = {"mha": 9, "mqa": 1, "gqa": 3}
NHEADS_SMALL = 6  # FlashAttention 3's tests
NHEADS_K_SMALL = {"mha": 6, "mqa": 1, "gqa": 2}


def _window(seed: int, sk: int) -> tuple[int, int]:
    """FlashAttention's ``window_size = torch.randint(0, seqlen_k, (2,))`` per cell,
    from a fixed seed so the grid is the same every run."""
    rng = random.Random(seed)
    return rng.randrange(sk), rng.randrange(sk)


def _padding_lengths(seed: int, s: int, batch: int) -> tuple[int, ...]:
    """FlashAttention's ``generate_random_padding_mask(mode="random")`` lengths."""
    rng = random.Random(seed)
    return tuple(rng.randint(max(1, s - 20), s) for _ in range(batch))


def grid_problems(varlen: bool = True, max_heads: int | None = None) -> list[Problem]:
    """Every cell of the grid, in pytest's order (dense test first, then varlen).
    ``max_heads`` below 9 switches to FlashAttention 3's head counts."""
    small = max_heads is not None and max_heads < NHEADS
    nheads, nheads_k = (NHEADS_SMALL, NHEADS_K_SMALL) if small else (NHEADS, NHEADS_K)
    cells = []
    tests = [("output", SEQLEN_PAIRS)] + ([("varlen", VARLEN_SEQLEN_PAIRS)] if varlen else [])
    for test, pairs in tests:
        for sq, sk in pairs:
            for causal in (False, True):
                for d in HEAD_DIMS:
                    for local in (False, True):
                        for sinks in (False, True):
                            for mha in MHA_TYPES:
                                for dtype in DTYPES:
                                    seed = len(cells)
                                    wl, wr = _window(seed, sk) if local else (None, None)
                                    if test == "varlen":
                                        lq = _padding_lengths(2 * seed, sq, BATCH)
                                        lk = _padding_lengths(2 * seed + 1, sk, BATCH)
                                        seqs = {"seqlen_q": lq, "seqlen_k": lk}
                                    else:
                                        seqs = {"seqlen_q": sq, "seqlen_k": sk}
                                    cells.append(
                                        Problem(
                                            batch=BATCH,
                                            heads_q=nheads,
                                            heads_kv=nheads_k[mha],
                                            head_dim_qk=d,
                                            head_dim_v=d,
                                            dtype=dtype,
                                            causal=causal,
                                            align="bottom_right",
                                            window_left=wl,
                                            window_right=wr,
                                            sinks=sinks,
                                            seed=seed,
                                            **seqs,
                                        )
                                    )
    return [c.validate() for c in cells]


@dataclass
class GridResult:
    kernel: str
    cases: list = field(default_factory=list)  # CaseResults actually run (skips not kept)
    skipped: int = 0  # cells outside the kernel's capability
    failure: CaseResult | None = None  # the first failing cell (no shrinking: a grid has none)
    examples_to_fail: int | None = None  # cells run up to and including the failure
    seconds_to_fail: float | None = None
    elapsed: float = 0.0
    exhausted: bool = False  # every cell was run within the budget

    @property
    def failed(self) -> bool:
        return self.failure is not None


def run_grid(
    kernel,
    time_budget: float,
    *,
    problems: list[Problem] | None = None,
    config: RunConfig | None = None,
    stop_on_failure: bool = True,
) -> GridResult:
    """Run the grid cells in order until one fails (like ``pytest -x``) or the budget is
    spent. A cell is started only while budget remains."""
    cells = grid_problems(max_heads=kernel.capability.max_heads) if problems is None else problems
    res = GridResult(kernel.name)
    t0 = time.perf_counter()
    for p in cells:
        if kernel.capability.excludes(p):
            res.skipped += 1
            continue
        if time.perf_counter() - t0 > time_budget:
            break
        case = run_case(kernel, p, config)
        if case.status == Status.SKIPPED:
            res.skipped += 1
            continue
        res.cases.append(case)
        if case.failed and res.failure is None:
            res.failure = case
            res.examples_to_fail = len(res.cases)
            res.seconds_to_fail = time.perf_counter() - t0
            if stop_on_failure:
                break
    else:
        res.exhausted = True
    res.elapsed = time.perf_counter() - t0
    return res
