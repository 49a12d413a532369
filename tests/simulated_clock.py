"""A search's clock that only a simulated kernel moves (tests/test_compile_bound.py and
scripts/compile_bound_sim.py patch it in as the ``time`` of the campaign, shrinking, state,
configuration-phase and runner modules): ``perf_counter`` creeps by 10 us a call, a kernel adds
its simulated build and call seconds to ``t``, and everything else is the real ``time``."""

import time


class SimulatedClock:
    def __init__(self):
        self.t = 1000.0

    def perf_counter(self):
        self.t += 1e-5
        return self.t

    def __getattr__(self, name):
        return getattr(time, name)
