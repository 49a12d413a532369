"""Prepare JIT kernels before their campaigns start (a cold `difftest run` on the CPU
was dominated by TileLang builds, one at a time inside the campaign).

An adapter may offer ``prepare(problems, wait=False)``: start building, on every core,
what those Problems need, and return a job whose ``wait()`` gives counts and seconds.
``start`` calls it for each kernel of a run with the Problems its campaign is known to
run first (saved failures and the edge corpus, which hold the configurations most drawn
Problems reuse: strategies/compile.py) and, under the ci profile on a CPU target, one per
configuration its draws may take (all of them: ``corpus_configs``); every kernel's builds run at once, and
``wait(kernel)`` joins them. ``difftest run`` joins all of them before the first campaign:
campaigns have wall-clock budgets, and builds running beside the CPU campaigns took their
CPU (measured on the 2-core machine: torch-blockwise ran 58 cases in its 150 s instead of
117). A kernel without ``prepare`` is left alone.
"""

import time

from difftest.search.failure_store import load_failures


class Preparation:
    def __init__(self):
        self.jobs: dict = {}  # kernel name -> job with wait()
        self.results: dict = {}  # kernel name -> counts (after wait)

    def wait(self, kernel) -> dict | None:
        """Join ``kernel``'s builds (None when it had nothing to prepare)."""
        name = getattr(kernel, "name", kernel)
        job = self.jobs.pop(name, None)
        if job is not None:
            t0 = time.perf_counter()
            res = dict(job.wait())
            res["waited_s"] = round(time.perf_counter() - t0, 2)
            self.results[name] = res
        return self.results.get(name)

    def close(self) -> None:
        for name in list(self.jobs):
            self.wait(name)


def campaign_problems(kernel, profile: str, database: str | None) -> list:
    """The Problems whose configurations a campaign of ``kernel`` compiles: saved failures,
    the edge corpus and, where its draws keep to the corpus (the ci profile on a CPU
    target: strategies/compile.py ``corpus_only``), one per configuration they may take,
    so such a campaign compiles nothing the prebuild did not build."""
    # lazy: keeps torch off --help
    from difftest import strategies
    from difftest.strategies.compile import corpus_configs, corpus_only

    spec = getattr(kernel, "spec", None) or kernel.name
    c = kernel.capability
    saved = [p for p in load_failures(database, spec, profile) if c.covers(p)]
    drawn = corpus_configs(c, profile) if corpus_only(c, profile) else []
    return saved + list(strategies.edge_problems(c, profile)) + drawn


def start(kernels, profile: str, database: str | None = None, log=None) -> Preparation:
    """Start every ``prepare``-able kernel's builds (in the calling thread, before any
    campaign runs: the build pool forks here)."""
    prep = Preparation()
    for k in kernels:
        if not hasattr(k, "prepare") or k.available():
            continue
        try:
            prep.jobs[k.name] = k.prepare(campaign_problems(k, profile, database), log=log, wait=False)
        except Exception as e:  # a prebuild is an optimisation: the campaign builds what it needs
            prep.results[k.name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return prep
