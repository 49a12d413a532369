"""The campaign's one-line progress display."""

import sys
import time


class Progress:
    """A one-line progress display on stderr (a terminal only), shown once a campaign
    runs longer than ``after`` seconds."""

    def __init__(self, label: str, total: int, enabled: bool, after: float = 3.0, stream=None):
        self.stream = stream or sys.stderr
        self.label, self.total, self.after = label, total, after
        self.enabled = enabled and (stream is not None or self.stream.isatty())
        self.t0 = time.perf_counter()
        self.shown = False

    def update(self, done: int, failed: int, worst: float, phase: str = ""):
        if not self.enabled:
            return
        dt = time.perf_counter() - self.t0
        if dt < self.after:
            return
        width = 24
        frac = min(1.0, done / max(1, self.total))
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        self.stream.write(
            f"\r{self.label} [{bar}] {done}/{self.total} failed={failed} worst={worst:.3g} {dt:.0f}s {phase}   "
        )
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
