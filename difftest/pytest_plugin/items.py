"""``pytest --difftest-kernel NAME`` (repeatable): tests for a kernel without a test file.

Each named kernel becomes one test for the whole campaign (``difftest::NAME``: fails on
any failing case, kernel errors included, with the shrunk case and its reproducer) and
one per output it produces (``difftest::NAME::dq``: fails when a case failed a gate of
that output). ``-k dq`` or ``-k NAME`` select as usual.

The campaign runs once per kernel per pytest session, whichever test needs it first;
the others read its record. Under pytest-xdist (``-n auto``) the tests of one kernel may
land on different workers, so the record is a file under ``--difftest-out`` keyed by the
session's run id (xdist's ``testrunuid``, shared by all workers) and guarded by a file
lock: one worker runs the campaign, the others wait for it. With
``--difftest-gpu-per-worker`` each worker has its own GPU (pytest_plugin.pytest_configure).
"""

import fcntl
import json
import os
import uuid
from pathlib import Path

import pytest

from difftest.errors import FileFormatError
from difftest.printable import block
from difftest.safeio import atomic_write_text, ensure_dir, open_append, read_json
from difftest.vocab import CampaignStatus

_RUN_ID = pytest.StashKey[str]()


class DifftestFailure(Exception):
    pass


def kernel_outputs(name: str) -> tuple[list[str], str | None]:
    """The outputs a kernel declares (Capability.outputs; dsink only with sinks), and an error line
    when the name does not resolve."""
    # lazy: keeps the run machinery out of every pytest session (the plugin loads into each)
    from difftest.execute import adapter as registry

    try:
        kernel = registry.get(name)
    except KeyError as e:
        return [], str(e.args[0])
    except Exception as e:  # an adapter that fails to import: the test says so
        return [], f"{type(e).__name__}: {e}"
    cap = kernel.capability
    return [o for o in cap.outputs if o != "dsink" or cap.sinks], None


def run_id(config) -> str:
    if _RUN_ID not in config.stash:
        workerinput = getattr(config, "workerinput", None)
        config.stash[_RUN_ID] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    return config.stash[_RUN_ID]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def campaign_record(config, kernel: str) -> dict:
    """The kernel's campaign record (reports.campaign_record), run once per session. The
    record, its folder and its lock are made and read following no link (safeio), so a
    planted ``NAME.json.lock -> ~/.bashrc`` is neither truncated nor locked."""
    # lazy: keeps the run machinery out of every pytest session (the plugin loads into each)
    from difftest.pytest_plugin.session import run_campaign
    from difftest.report.write import campaign_record as record

    out = Path(config.getoption("--difftest-out"))
    folder = ensure_dir(out / "pytest-campaigns" / run_id(config), root=out)
    path = folder / f"{_safe(kernel)}.json"
    fd = open_append(str(path) + ".lock", root=out)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.path.lexists(path):
            return read_json(path, FileFormatError, "campaign record", root=out)
        res = run_campaign(config, kernel)  # the session's RunPlan: its options, prebuild, worker, run folder
        rec = record(res)
        rec["pytest_worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
        rec["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")  # --difftest-gpu-per-worker's pick
        text = json.dumps(rec, default=str)
        atomic_write_text(path, text, root=out)
        return json.loads(text)  # plain JSON values (no enums) for every worker alike
    finally:
        os.close(fd)  # releases the lock


def _case_text(case: dict, output: str | None = None) -> str:
    # lazy: keeps the run machinery out of every pytest session (the plugin loads into each)
    from difftest.model.problem import Problem, ProblemError

    try:
        short = Problem.from_dict(case["problem"]).short()
    except (ProblemError, TypeError, ValueError, KeyError):
        short = json.dumps(case.get("problem"))
    lines = [f"[{case.get('status', '?').upper()}] {case.get('kernel', '')} on {short}"]
    if case.get("reason"):
        lines.append(f"  reason: {case['reason'].strip()}")
    lines += [
        f"  {v.get('message', '')}"
        for v in case.get("verdicts", [])
        if not v["passed"] and (output is None or v["output"] == output)
    ]
    return "\n".join(lines)


class KernelItem(pytest.Item):
    """The whole campaign of one kernel (``output`` None) or one of its outputs."""

    def __init__(self, *, kernel: str, output: str | None, error: str | None = None, **kw):
        super().__init__(**kw)
        self.kernel, self.output, self.error = kernel, output, error
        self.extra_keyword_matches.update({kernel, "difftest"} | ({output} if output else set()))

    def runtest(self):
        if self.error:
            raise DifftestFailure(f"--difftest-kernel {self.kernel}: {self.error}")
        rec = campaign_record(self.config, self.kernel)
        self.user_properties += [
            ("difftest_kernel", str(rec["kernel"])),
            ("difftest_profile", str(rec.get("profile"))),
            ("difftest_cases", int(rec.get("examples") or 0)),
            ("difftest_status", str(rec.get("status"))),
        ]
        if (rec.get("reproducer") or {}).get("py"):
            self.user_properties.append(("difftest_reproducer", str(Path(rec["reproducer"]["py"]).resolve())))
        if rec["status"] == CampaignStatus.UNAVAILABLE:
            pytest.skip(f"kernel {self.kernel} unavailable: {rec.get('reason', '')}")
        repro = (rec.get("reproducer") or {}).get("py")
        failure = rec.get("failure")
        if self.output is None:
            if rec["status"] == CampaignStatus.NOTHING_CHECKED:
                raise DifftestFailure(
                    f"{self.kernel}: nothing checked: the campaign judged no case "
                    f"({rec.get('examples', 0)} cases, every one skipped or none run)"
                )
            if rec["status"] == CampaignStatus.FAILED or rec["counts"]["failed"] or rec["counts"]["error"]:
                n = rec["counts"]["failed"] + rec["counts"]["error"]
                text = [f"{self.kernel}: {n} of {rec['examples']} cases failed"]
                if failure:
                    text += [
                        f"shrunk failure (after {rec.get('examples_to_fail')} examples):",
                        _case_text(failure),
                        f"reproducer: {repro}",
                    ]
                raise DifftestFailure("\n".join(text))
            return
        stats = (rec.get("outputs") or {}).get(self.output)
        if not stats or not stats["cases"]:
            pytest.skip(f"no case of the campaign checked {self.output}")
        if stats["failed"]:
            text = [
                f"{self.kernel} {self.output}: {stats['failed']} of {stats['cases']} cases failed "
                f"(worst ratio {stats['worst_ratio']:.3g})"
            ]
            if failure and any(g.startswith(f"{self.output}:") for g in failure.get("failed_gates") or []):
                text += ["shrunk failure:", _case_text(failure, self.output), f"reproducer: {repro}"]
            else:
                first = next(
                    c
                    for c in rec["cases"]
                    if any(v["output"] == self.output and not v["passed"] for v in c.get("verdicts", []))
                )
                text += ["first failing case (not shrunk):", _case_text(first, self.output)]
            raise DifftestFailure("\n".join(text))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, DifftestFailure):
            return block(str(excinfo.value))  # texts from a campaign record: printable
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, self.nodeid


class KernelCollector:
    """Registered by pytest_plugin when --difftest-kernel is given: adds the items before
    -k / -m selection sees them."""

    def __init__(self, kernels: list[str]):
        self.kernels = list(dict.fromkeys(kernels))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        new = []
        for kernel in self.kernels:
            outputs, error = kernel_outputs(kernel)
            base = f"difftest::{kernel}"
            new.append(
                KernelItem.from_parent(session, name=kernel, nodeid=base, kernel=kernel, output=None, error=error)
            )
            for o in outputs:
                new.append(
                    KernelItem.from_parent(
                        session, name=f"{kernel}::{o}", nodeid=f"{base}::{o}", kernel=kernel, output=o
                    )
                )
        items[:0] = new
