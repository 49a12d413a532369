"""The run's heap and Python's cyclic garbage collector.

``difftest run`` imports most of what it runs before its first case: torch, Hypothesis, the
adapters, sympy (run/lanes.py ``preload``). Those imports made the collector run full
collections in the middle of them (4 of them, 0.26 s of a warm CPU main job's 1.5 s serial
start), each walking every object imported so far; and every later full collection, in the run
and in each process forked from it (a lane, a kernel worker), walked them all again (0.2 s in
the run's report writing, 0.5-0.7 s in the lanes). None of those objects is garbage.

``setup()`` runs the run's setup with the collector off and then *freezes* what it made
(``gc.freeze``: moved out of the collector's sight for good, in this process and in every one
forked from it): ``load_kernels``, ``lanes.preload`` and, in a lane, its adapter's own imports
(TileLang's) before its worker forks. ``before_fork()`` freezes what came since, before the
lanes fork. A frozen object
is still freed when its last reference goes; only a reference cycle among them would stay,
and a run's imports leave none worth a collection.
"""

import contextlib
import gc


@contextlib.contextmanager
def setup():
    """The collector off for the block, then what the block made frozen (the collector back
    on, unless it was off before)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def before_fork() -> None:
    """Freeze what this process holds: a child forked next never collects it."""
    gc.freeze()
