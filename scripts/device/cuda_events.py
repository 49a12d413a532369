"""Timing on the GPU for the device scripts: the best of several calls, bracketed by CUDA events."""

import torch


def best_seconds(fn, repeats: int = 5) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (after one untimed call), each
    bracketed by CUDA events on the current stream."""
    fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    best = float("inf")
    for _ in range(repeats):
        ev[0].record()
        fn()
        ev[1].record()
        torch.cuda.synchronize()
        best = min(best, ev[0].elapsed_time(ev[1]) / 1e3)
    return best
