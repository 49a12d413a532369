"""A case the GPU's memory could not hold: retried once, then skipped, never a finding.

On 2026-12-07 (H100, 17 campaigns side by side on one GPU) the device's memory ran out:
seven campaigns died with ``torch.OutOfMemoryError`` raised from difftest's own tensors
(drawing inputs, the float64 truth, a gate), and two reported "contract violation on
OutOfMemoryError" findings against fa3 and TileLang, whose 174-350 MiB allocations met a GPU
with 97-180 MiB free. Neither says anything about the kernel. So a case whose kernel, truth,
yardsticks or gates run out of device memory is run again once after this process returns
its cached blocks to the device; if memory runs out again the case is skipped with a reason
that starts ``vocab.DEVICE_MEMORY_SKIP`` (counted under the campaign, never judged, never a finding).

One exception stays an error of the kernel's: an allocation larger than the whole device
(``Tried to allocate`` more than its ``total capacity``), which no amount of free memory
serves: for a Problem inside the capability that is the kernel's (or its size arithmetic's)
own failure.
"""

import re

import torch

from difftest.model.problem import Problem
from difftest.vocab import DEVICE_MEMORY_SKIP, ErrorOrigin, Status

OOM_TYPE = torch.OutOfMemoryError.__name__  # "OutOfMemoryError", as a worker names it too
_SIZE = r"([\d.]+)\s*([KMGT]i?B)"
_REQUEST = re.compile(r"Tried to allocate " + _SIZE)
_TOTAL = re.compile(r"total capacity of " + _SIZE)
_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def _bytes(pattern: re.Pattern, text: str) -> float | None:
    m = pattern.search(text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else None


def out_of_memory(result) -> bool:
    """The case ended in a CUDA out-of-memory error (the kernel's, raised in a worker or
    here, or difftest's own)."""
    if result.status != Status.ERROR:
        return False
    return result.error_type == OOM_TYPE or "CUDA out of memory" in (result.reason or "")


def retryable(result) -> bool:
    """Ran out of device memory, asking for no more than the whole device holds (more is the
    kernel's own failure: no free memory serves it)."""
    if not out_of_memory(result):
        return False
    text = result.reason or ""
    want, total = _bytes(_REQUEST, text), _bytes(_TOTAL, text)
    return want is None or total is None or want <= total


def own_failure(kernel_name: str, problem: Problem, e: BaseException, result_type):
    """The CaseResult of difftest's own tensors running out of memory (inputs, truth, gates)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return result_type(
        kernel_name,
        problem,
        Status.ERROR,
        f"{OOM_TYPE}: {first}",
        error_type=OOM_TYPE,
        error_origin=ErrorOrigin.DIFFTEST,
    )


def skipped(result) -> None:
    """Turn a case that ran out of device memory twice into a skip that says so."""
    who = "difftest's own tensors" if result.error_origin == ErrorOrigin.DIFFTEST else "the kernel"
    first = next((line.strip() for line in (result.reason or "").splitlines() if "out of memory" in line), "")
    result.status = Status.SKIPPED
    result.reason = (
        f"{DEVICE_MEMORY_SKIP} ({who}), twice: {first[:300]} (other processes on the GPU, or a leak: "
        "run it alone; the case was not judged)"
    )
    result.verdicts = []
