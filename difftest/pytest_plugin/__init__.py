"""pytest plugin (entry point ``pytest11: difftest``).

- Fixture ``difftest_campaign(kernel, **kw)``: runs a campaign under the session's
  profile and fails the test with the shrunk case and its reproducer path. Kernels run
  in a worker process, as the CLI runs them (``isolate=False`` or
  ``--difftest-no-isolate`` to run in-process); each call adds JUnit properties
  (kernel, profile, cases, status, absolute reproducer path). Campaigns run through the
  session's RunPlan (difftest/run/plan.py, as ``difftest run`` runs them: prebuild, run
  folder ``--difftest-out``/pytest/runs/<id>/ with the session's reports, a kernel worker
  started with the environment the campaign runs in).
- Under pytest-xdist each worker limits torch's intra-op threads to
  ``max(1, cpu_count // workers)`` (unless OMP_NUM_THREADS is set), so ``-n 2`` does not
  oversubscribe the cores.
- Options: ``--difftest-profile`` (default: $DIFFTEST_PROFILE or "ci"),
  ``--difftest-out``, ``--difftest-gpu-per-worker`` (under pytest-xdist, pins
  CUDA_VISIBLE_DEVICES to one GPU per worker, by worker number).
- ``--difftest-kernel NAME`` (repeatable): a test per kernel and per output without a
  test file (difftest/pytest_plugin/items.py); ``--difftest-seed N``, ``--difftest-max-examples N``.
- Marker ``gpu`` (the plugin's only one): skipped where CUDA is unavailable, so CPU CI stays green.
- Light to load (it loads into every pytest session of anyone who installs difftest): the run
  machinery (session.py: RunPlan, the reports) is imported on a campaign's first use.
- A terminal summary table of every campaign run in the session (xdist workers
  included: each writes its part under the output directory).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from difftest.argcheck import MAX_EXAMPLES, MAX_SEED, UsageError, check_outputs, examples_int
from difftest.errors import FileFormatError
from difftest.model.profiles import PROFILES
from difftest.printable import block, cell
from difftest.pytest_plugin.items import KernelCollector
from difftest.pytest_plugin.stash import PLAN_KEY, RESULTS_KEY
from difftest.safeio import atomic_write_text, read_json
from difftest.vocab import CampaignStatus
from difftest.workdir import DEFAULT_OUT


def pytest_addoption(parser):
    g = parser.getgroup("difftest")
    g.addoption(
        "--difftest-profile",
        default=os.environ.get("DIFFTEST_PROFILE", "ci"),
        help=f"campaign profile for difftest_campaign ({', '.join(sorted(PROFILES))}; default "
        "$DIFFTEST_PROFILE, else ci)",
    )
    g.addoption(
        "--difftest-out", default=DEFAULT_OUT, help=f"directory for reports and reproducers (default {DEFAULT_OUT})"
    )
    g.addoption(
        "--difftest-gpu-per-worker",
        action="store_true",
        help="with pytest-xdist, give each worker one GPU (CUDA_VISIBLE_DEVICES by worker number)",
    )
    g.addoption(
        "--difftest-kernel",
        action="append",
        default=[],
        metavar="NAME",
        help="collect a test per kernel and per output, no test file needed (repeatable)",
    )
    g.addoption(
        "--difftest-seed",
        type=_seed,
        default=None,
        metavar="N",
        help="fix every campaign's search (a baseline and a candidate then draw the same problems)",
    )
    g.addoption(
        "--difftest-max-examples",
        type=examples_int,
        default=None,
        metavar="N",
        help=f"generated examples per campaign (overrides the profile; 1 to {MAX_EXAMPLES})",
    )
    g.addoption(
        "--difftest-no-isolate",
        action="store_true",
        help="run kernels in the test process instead of a worker process (a crash then ends the session)",
    )


def worker_threads(workers: int, cpus: int | None = None) -> int:
    """torch intra-op threads for one of ``workers`` xdist workers sharing the cores."""
    return max(1, (cpus or os.cpu_count() or 1) // max(1, workers))


def _limit_threads() -> None:
    """Under xdist: OMP_NUM_THREADS for this worker and its kernel processes, and torch's
    own setting if torch is already imported (an explicit OMP_NUM_THREADS is kept)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not os.environ.get("PYTEST_XDIST_WORKER") or workers < 1:
        return
    n = int(os.environ.setdefault("OMP_NUM_THREADS", str(worker_threads(workers))))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


def _seed(text):
    if not text.isdigit() or len(text) > 20 or int(text) > MAX_SEED:
        raise argparse.ArgumentTypeError(f"--difftest-seed {text[:40]!r}: allowed an integer in [0, 2**64-1]")
    return int(text)


def check_options(config) -> None:
    """Every option checked as its ``difftest run`` twin is (argcheck), one line each: the
    profile (also from $DIFFTEST_PROFILE), and ``--difftest-out`` when given (empty, a file,
    unwritable, a link where difftest writes). A pytest usage error (exit 4) before any test
    runs. The default ``--difftest-out`` is checked when a campaign first needs it, so a
    session without difftest tests is never stopped by the working folder."""
    profile = config.getoption("--difftest-profile")
    if profile not in PROFILES:
        raise pytest.UsageError(
            f"--difftest-profile {str(profile)[:40]!r} (or $DIFFTEST_PROFILE): allowed one of "
            f"{', '.join(sorted(PROFILES))}"
        )
    out = config.getoption("--difftest-out")
    if out != DEFAULT_OUT:
        try:
            check_outputs(out=out)
        except UsageError as e:
            raise pytest.UsageError(str(e).replace("--out", "--difftest-out", 1)) from None


def _gpu_ids() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env:
        return [x for x in env.split(",") if x.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def worker_gpu(worker_id: str, gpus: list[str]) -> str | None:
    """gw0 -> gpus[0], gw1 -> gpus[1], ... (wrapping); None outside xdist or without GPUs."""
    if not worker_id.startswith("gw") or not gpus:
        return None
    return gpus[int(worker_id[2:]) % len(gpus)]


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")  # the plugin's only marker
    config.stash[RESULTS_KEY] = []
    check_options(config)
    _limit_threads()
    if config.getoption("--difftest-kernel"):
        config.pluginmanager.register(KernelCollector(config.getoption("--difftest-kernel")), "difftest-kernels")
    worker = _worker_id(config) or ""
    if config.getoption("--difftest-gpu-per-worker") and worker:
        gpu = worker_gpu(worker, _gpu_ids())  # before anything initialises CUDA
        if gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu


def pytest_collection_modifyitems(config, items):
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    # lazy: keeps torch out of every pytest session without a gpu-marked test
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker gpu)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture
def difftest_campaign(request):
    """Run a campaign; fail the test with the shrunk case when the kernel fails.

    ``difftest_campaign(kernel, *, expect_failure=False, isolate=None, **kw)`` returns the
    CampaignResult. ``kernel``: a registry name, ``"module:attr"``, or an adapter instance.
    Keyword arguments:

    - ``expect_failure``: return a failing result instead of failing the test;
    - ``isolate``: run the kernel in a worker process, as the CLI does (default True, or
      False with ``--difftest-no-isolate``); an adapter instance without a ``spec`` cannot
      be rebuilt in a worker and runs in-process;
    - everything else goes to ``difftest.search.campaign.run_campaign``: ``profile`` (default
      ``--difftest-profile``), ``max_examples``, ``time_budget``, ``shrink_budget`` (seconds),
      ``seed`` (default ``--difftest-seed``, else the profile's), ``database`` (failure store
      and example database; None for none), ``edge_cases`` (the corner corpus first, default
      True), ``strategy``, ``config`` (a RunConfig: gates, device, poison, timeout_s; its
      ``isolate`` wins over the ``isolate`` argument), ``out_dir`` (default: the session's run
      folder, ``--difftest-out``/pytest/runs/<run id>/).

    Campaigns run through the session's RunPlan (difftest/run/plan.py, via
    pytest_plugin/session.py), as ``difftest run`` runs them: JIT kernels prebuilt first, one
    run folder, a kernel worker started with the environment the campaign runs in (a
    ``monkeypatch.setenv`` before the call reaches the kernel), the session's reports.

    Each call records JUnit properties on the test: difftest_kernel, difftest_profile,
    difftest_cases, difftest_status and difftest_reproducer (absolute path, when it failed).
    """
    config = request.config

    def run(kernel, *, expect_failure: bool = False, isolate: bool | None = None, **kw):
        # lazy: keeps run/plan and the reports out of every pytest session that runs no campaign
        from difftest.pytest_plugin.session import run_campaign

        res = run_campaign(config, kernel, isolate=isolate, **kw)
        props = request.node.user_properties
        props += [
            ("difftest_kernel", res.kernel),
            ("difftest_profile", res.profile),
            ("difftest_cases", len(res.cases)),
            ("difftest_status", str(res.status)),
            ("difftest_worker", _worker_id(config) or "main"),  # which xdist worker, on which GPUs
            ("difftest_cuda_visible_devices", os.environ.get("CUDA_VISIBLE_DEVICES", "")),
        ]
        if res.reproducer:
            props.append(("difftest_reproducer", str(Path(res.reproducer["py"]).resolve())))
        if res.status == CampaignStatus.UNAVAILABLE:
            pytest.skip(f"kernel {res.kernel} unavailable: {res.reason}")
        if res.status == CampaignStatus.NOTHING_CHECKED:  # never a pass, expected failure or not
            pytest.fail(
                f"{res.kernel}: nothing checked: the campaign judged no case ({len(res.cases)} cases, "
                "every one skipped or none run): give it cases (a larger time_budget or max_examples, "
                "a wider strategy)",
                pytrace=False,
            )
        if res.failed and not expect_failure:
            # lazy: keeps the run machinery out of every pytest session (the plugin loads into each)
            from difftest.search.findings import failure_message

            pytest.fail(block(failure_message(res)), pytrace=False)
        return res

    return run


def _worker_id(config) -> str | None:
    """This process's xdist worker id, from the config xdist gives its workers (not the
    environment, which a pytest run started inside an xdist worker inherits)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get("workerid") if workerinput else None


def _part_path(config, worker):
    return Path(config.getoption("--difftest-out")) / f"pytest-summary-{worker}.json"


def _part_records(part: Path, out: Path) -> list:
    """A worker's summary part, read as a file of the output folder (bounded, no link
    followed) and checked; a part that is not one (planted, cut) is dropped with a warning
    row rather than breaking the session's summary."""
    try:
        recs = read_json(part, FileFormatError, "pytest summary part", root=out)
        if not isinstance(recs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("kernel"), str) for r in recs
        ):
            raise FileFormatError(f"{part}: not a list of campaign records")
        return recs
    except FileFormatError as e:
        return [
            {
                "kernel": f"(unreadable part: {e})",
                "profile": "-",
                "examples": 0,
                "status": "-",
                "examples_to_fail": None,
            }
        ]
    finally:
        part.unlink(missing_ok=True)


def pytest_sessionfinish(session):
    if PLAN_KEY in session.config.stash or "difftest.execute.isolation" in sys.modules:
        # lazy: keeps run/plan and the reports out of every pytest session that runs no campaign
        from difftest.pytest_plugin.session import finish

        finish(session)
    results = session.config.stash.get(RESULTS_KEY, [])
    worker = _worker_id(session.config)
    if worker and results:
        # lazy: keeps the run machinery out of every pytest session (the plugin loads into each)
        from difftest.report.write import campaign_record

        path = _part_path(session.config, worker)
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        recs = [
            {
                **{k: v for k, v in campaign_record(r).items() if k != "cases"},
                "pytest_worker": worker,
                "cuda_visible_devices": gpus,
            }
            for r in results
        ]
        atomic_write_text(path, json.dumps(recs, default=str))  # no link followed under the output folder


def pytest_terminal_summary(terminalreporter, config):
    results = config.stash.get(RESULTS_KEY, [])
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    rows = [(r.kernel, r.profile, len(r.cases), r.status, r.examples_to_fail, None, gpus) for r in results]
    out = Path(config.getoption("--difftest-out"))
    if not _worker_id(config) and out.exists():
        for part in sorted(out.glob("pytest-summary-gw*.json")):
            for rec in _part_records(part, out):
                rows.append(
                    (
                        rec["kernel"],
                        rec.get("profile"),
                        rec.get("examples"),
                        rec.get("status"),
                        rec.get("examples_to_fail"),
                        rec.get("pytest_worker"),
                        rec.get("cuda_visible_devices") or None,
                    )
                )
    if not rows:
        return
    terminalreporter.section("difftest campaigns")
    for kernel, profile, n, status, to_fail, worker, gpu in rows:
        extra = f", failed after {to_fail} examples" if to_fail else ""
        where = ", ".join(x for x in (worker and f"worker {worker}", gpu and f"CUDA_VISIBLE_DEVICES={gpu}") if x)
        where = f" ({where})" if where else ""
        terminalreporter.write_line(cell(f"{kernel} [{profile}]: {status}, {n} cases{extra}{where}"))
