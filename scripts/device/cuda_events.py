"""Timing on the GPU for the device scripts: one call, or the best of several, bracketed by CUDA events."""

import torch


def seconds(fn) -> float:
    """Seconds of one call of ``fn``, bracketed by CUDA events on the current stream."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    fn()
    ev[1].record()
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1]) / 1e3


def best_seconds(fn, repeats: int = 5) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (after one untimed call)."""
    fn()
    torch.cuda.synchronize()
    return min(seconds(fn) for _ in range(repeats))
