"""A pytest session's run of campaigns: one ``RunPlan`` (difftest/run/plan.py) per pytest
process, built from the plugin's options, through which the ``difftest_campaign`` fixture
and the ``--difftest-kernel`` items run every campaign, exactly as ``difftest run`` does
(prebuild, run folder, kernel worker, reports).

Its run folder is ``--difftest-out``/pytest/runs/<run id>/ (case logs, reproducers, and at
the end of the session report.json, summary.md and report.html); a pytest session is not
``difftest run --resume``'s to continue, so its folders are kept apart from the CLI's.
"""

import os
import sys

import pytest

from difftest.argcheck import UsageError, check_outputs
from difftest.pytest_plugin.stash import PLAN_KEY, RESULTS_KEY
from difftest.run.plan import PYTEST_RUNS, RunOptions, RunPlan


def options(config) -> RunOptions:
    """The session's RunOptions from the plugin's command-line options."""
    return RunOptions(
        kernels=tuple(config.getoption("--difftest-kernel") or ()),
        profile=config.getoption("--difftest-profile"),
        out=config.getoption("--difftest-out"),
        seed=config.getoption("--difftest-seed"),
        max_examples=config.getoption("--difftest-max-examples"),
        isolate=not config.getoption("--difftest-no-isolate"),
        argv=("pytest", *map(str, config.invocation_params.args)),
    )


def plan(config) -> RunPlan:
    """This pytest process's RunPlan (made on first use: a session without campaigns
    leaves no run folder)."""
    if PLAN_KEY not in config.stash:
        opts = options(config)
        try:  # the output folder and database as `difftest run` checks them (a link where it writes: refused)
            check_outputs(out=opts.out, db=opts.db)
        except UsageError as e:
            pytest.fail(f"difftest: {str(e).replace('--out', '--difftest-out', 1)}", pytrace=False)
        config.stash[PLAN_KEY] = RunPlan(opts, publish=False, runs_base=os.path.join(opts.out, PYTEST_RUNS))
    return config.stash[PLAN_KEY]


def run_campaign(config, kernel, **kw):
    """A campaign of this session (through its RunPlan), recorded for the summary table and
    in the run folder."""
    p = plan(config)
    res = p.campaign(kernel, **kw)
    config.stash[RESULTS_KEY].append(res)
    p.finished(res.kernel, res)
    return res


def finish(session) -> None:
    """The kernel workers closed; the session's reports written in its run folder."""
    if "difftest.execute.isolation" in sys.modules:  # the campaigns' kernel worker processes
        sys.modules["difftest.execute.isolation"].close_all()
    p = session.config.stash.get(PLAN_KEY, None)
    if p is None or p.run is None:
        return
    interrupted = "KeyboardInterrupt" if session.exitstatus == pytest.ExitCode.INTERRUPTED else None
    p.write_reports(p.results, interrupted)
