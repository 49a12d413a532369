"""What a seeded search may depend on: its seed, never the kernel or the code around it.

``--seed N`` promises that two runs draw the same Problems: CI sees the same cases every
run, and ``difftest gate`` compares a baseline and a candidate problem by problem. Two
features of Hypothesis break that promise, and a seeded campaign turns both off:

- **Targeting** (``hypothesis.target``): after half its examples Hypothesis mutates the
  examples that scored highest, so the draws follow the kernel's error ratios. A candidate
  that changes only the last bits of dQ, or any kernel with atomics, then draws other
  Problems from the same seed: in a measured 300-example ``ci`` run, a baseline and a
  candidate whose dQ differed by 2^-20 relative (both passing) shared 116 of 380 Problems.
  The campaign steers by the ratio only when unseeded (``Campaign._property``).
- **Local constants** (Hypothesis >= 6.131): with a small probability per draw, integers,
  floats and strings are taken from the literals of every imported module outside
  site-packages and the standard library: the kernel under test, its repository, an
  editable difftest. Importing a module of new literals (tile sizes) between two runs changed
  the draws from the 123rd Problem on (ci, 300 examples, targeting off; results/seeded_search.md).
  ``local_constants_off()`` gives a seeded search none. Hypothesis has no setting for this
  (6.170), so it replaces the module's internal collector for the duration;
  tests/test_seeded_search.py fails if a Hypothesis upgrade moves it.

Unseeded searches (the hunting profiles) keep both: they reproduce nothing by design, and
the kernel's own literals (block sizes) are useful draws there.
"""

import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_saved = None


@contextmanager
def local_constants_off():
    """Hypothesis draws no constants from local source code inside this block (nestable,
    thread-safe). Its cache of permitted constants is emptied on entry and exit, so neither
    what was collected before leaks in nor the empty pools leak out."""
    global _depth, _saved
    try:
        # lazy: a Hypothesis internal, guarded for versions without it
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - every supported Hypothesis has the module
        providers = None
    if providers is None or not all(
        hasattr(providers, n) for n in ("_get_local_constants", "Constants", "CONSTANTS_CACHE")
    ):
        yield  # a Hypothesis without local constants: nothing to turn off
        return
    with _lock:
        if _depth == 0:
            _saved = providers._get_local_constants
            providers._get_local_constants = lambda: providers.Constants()  # empty pools
            providers.CONSTANTS_CACHE.cache.clear()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                providers._get_local_constants = _saved
                providers.CONSTANTS_CACHE.cache.clear()
