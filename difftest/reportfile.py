"""Reading report.json files back (for ``gate``, ``merge`` and ``report --html``), and the
per-output numbers those commands recompute from a report's case records.

A report is data written by ``reports.write_json``: ``{"difftest_report": 1, "campaigns":
[{"kernel", "status", "cases": [case records], "coverage", "settings", ...}]}``. Files
ending in ``.xz`` are read through lzma (the raw reports under results/ are compressed).
Anything else is refused with a ``ReportError`` whose message is one line naming the
file, the field and what is allowed.
"""

import json
import lzma
import math
import os
from pathlib import Path

from .problem import OUTPUTS
from .safeio import atomic_write_text

RATIO_CAP = 1e6


class ReportError(ValueError):
    pass


def load_report(path) -> dict:
    path = Path(path)
    try:
        raw = lzma.open(path).read() if path.suffix == ".xz" else path.read_bytes()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file (allowed: a report.json written by `difftest run`)") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a directory (allowed: a report.json written by `difftest run`)") from None
    except (OSError, lzma.LZMAError) as e:
        raise ReportError(f"{path}: cannot read: {e}") from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not JSON ({e}); allowed: a report.json written by `difftest run`") from None
    check_report(doc, path)
    return doc


def check_report(doc, path="report") -> None:
    if not isinstance(doc, dict) or "difftest_report" not in doc:
        raise ReportError(f"{path}: not a difftest report (no 'difftest_report' key at the top level)")
    camps = doc.get("campaigns")
    if not isinstance(camps, list):
        raise ReportError(f"{path}: field 'campaigns' is {type(camps).__name__}: allowed a list of campaigns")
    for i, c in enumerate(camps):
        if not isinstance(c, dict) or not isinstance(c.get("kernel"), str):
            raise ReportError(f"{path}: campaigns[{i}] has no 'kernel' name: allowed an object with 'kernel', "
                              f"'status', 'cases'")
        if not isinstance(c.get("cases", []), list):
            raise ReportError(f"{path}: campaigns[{i}] ({c['kernel']}): field 'cases' is "
                              f"{type(c['cases']).__name__}: allowed a list")
        for j, case in enumerate(c.get("cases", [])):
            if not isinstance(case, dict) or not isinstance(case.get("problem"), dict) \
                    or case.get("status") not in ("passed", "failed", "error", "skipped") \
                    or not isinstance(case.get("verdicts", []), list):
                raise ReportError(f"{path}: campaigns[{i}] ({c['kernel']}) cases[{j}]: allowed an object with "
                                  f"'problem' (object), 'status' (passed|failed|error|skipped), 'verdicts' (list)")
            for v in case.get("verdicts", []):
                if not isinstance(v, dict) or not {"output", "gate", "passed"} <= set(v):
                    raise ReportError(f"{path}: campaigns[{i}] ({c['kernel']}) cases[{j}]: a verdict lacks "
                                      f"'output', 'gate' or 'passed'")


def problem_key(problem: dict) -> str:
    """A Problem record's identity (the same canonical JSON as Problem.to_json)."""
    return json.dumps(problem, sort_keys=True)


def ratio(v: dict) -> float:
    r = (v.get("numbers") or {}).get("ratio", 0.0)
    try:
        r = float(r)
    except (TypeError, ValueError):
        return RATIO_CAP
    return min(r, RATIO_CAP) if math.isfinite(r) else RATIO_CAP


def gate_results(campaign: dict) -> dict:
    """{(output, gate): {"checked", "failed", "worst_ratio", "first_failing": case}} over the
    campaign's non-skipped cases. ``determinism_info`` (kernels that do not claim
    determinism) counts differing elements in ``failed``'s place under "differing"."""
    out = {}
    for case in campaign.get("cases", []):
        if case.get("status") == "skipped":
            continue
        for v in case.get("verdicts", []):
            key = (v["output"], v["gate"])
            s = out.setdefault(key, {"checked": 0, "failed": 0, "worst_ratio": 0.0, "differing_cases": 0,
                                     "first_failing": None})
            s["checked"] += 1
            if not v["passed"]:
                s["failed"] += 1
                if s["first_failing"] is None:
                    s["first_failing"] = case
            if v["gate"] in ("budget", "second_reference"):
                s["worst_ratio"] = max(s["worst_ratio"], ratio(v))
            if v["gate"] in ("determinism", "determinism_info") and (v.get("numbers") or {}).get("differing", 0):
                s["differing_cases"] += 1
    return out


def output_stats(cases: list) -> dict:
    """Per output, from case records: cases checked, passed, failed, worst budget ratio (the
    numbers reports.output_stats gives for live cases)."""
    stats = {}
    for c in cases:
        if c.get("status") == "skipped":
            continue
        for name in OUTPUTS:
            vs = [v for v in c.get("verdicts", []) if v["output"] == name]
            if not vs:
                continue
            s = stats.setdefault(name, {"cases": 0, "passed": 0, "failed": 0, "worst_ratio": 0.0})
            s["cases"] += 1
            s["passed" if all(v["passed"] for v in vs) else "failed"] += 1
            s["worst_ratio"] = max(s["worst_ratio"], max((ratio(v) for v in vs if v["gate"] == "budget"), default=0.0))
    return stats


def error_cases(campaign: dict) -> list:
    return [c for c in campaign.get("cases", []) if c.get("status") == "error"]


def write_text_atomic(path, text: str) -> Path:
    """The project's atomic writer (safeio), with the usual permissions (0666 less the
    umask) instead of mkstemp's 0600: HTML, JUnit and merged reports are for others to read."""
    umask = os.umask(0)
    os.umask(umask)
    return atomic_write_text(path, text, mode=0o666 & ~umask)
