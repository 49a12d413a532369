"""Triage: what kind of finding a case is, as a kernel team sorts them.

``classify(case)`` is a function of one case result (a ``CaseResult`` or its JSON dict,
so saved reports can be re-triaged):

- ``wrong result``: an output failed a value gate (budget, elementwise, nonfinite,
  poison, shape, missing, second reference);
- ``nondeterminism``: only the determinism gate failed (a kernel that claims it);
- ``declaration problem``: only declared-but-not-returned outputs failed (the capability's
  ``outputs`` is wrong, not the kernel's maths: difftest/judge/declaration.py);
- ``contract violation``: the kernel raised (assertion, build error, launch failure,
  NotImplementedError/ValueError/RuntimeError about unsupported arguments) on a Problem
  its declared capability accepts: the runner skips what the capability excludes, so
  every kernel exception of a case that ran is one;
- ``crash``: the worker process died (a signal); ``hang``: it did not return within
  the timeout (both need ``--isolate``, the default of campaigns); ``build timeout``: it
  was killed while its JIT build was still running (past ``--compile-timeout``; the build
  is not counted against ``--timeout``): the kernel never got to hang, so this is not
  one, but a build that long is still a finding to look at (or a loaded host);
- ``difftest error``: difftest's own reference failed (never the kernel's fault);
- ``overflow-limited``: passed, with elements accepted at the dtype's limits
  (gates.dtype_limited), counted per output, never hidden;
- ``passed`` / ``skipped``.

``summarize(cases)`` gives the campaign's counts per kind and the overflow-limited
elements per output.
"""

import re
from collections import Counter

from difftest.vocab import ErrorOrigin, Status, TriageKind

Kind = TriageKind  # the name this module's readers use


FINDINGS = (
    Kind.WRONG_RESULT,
    Kind.NONDETERMINISM,
    Kind.DECLARATION,
    Kind.CONTRACT_VIOLATION,
    Kind.CRASH,
    Kind.HANG,
    Kind.BUILD_TIMEOUT,
)
_DETERMINISM = ("determinism",)


def _get(case, name, default=None):
    if isinstance(case, dict):
        return case.get(name, default)
    return getattr(case, name, default)


def _verdicts(case) -> list[dict]:
    out = []
    for v in _get(case, "verdicts", []) or []:
        if isinstance(v, dict):
            out.append(v)
        else:
            out.append({"output": v.output, "gate": v.gate, "passed": v.passed, "numbers": v.numbers})
    return out


LEGACY_INTERNAL = "internal:"  # how error_type and reason marked difftest's own errors before error_origin


def error_origin(case) -> ErrorOrigin:
    """Whose exception an error case (a CaseResult or a report's dict) is. The one reader
    of the older marking: error_type "internal:<Type>", or before error_type, a reason
    starting "internal:"."""
    origin = _get(case, "error_origin", "") or ""
    if origin:
        return ErrorOrigin(origin)
    legacy = (_get(case, "error_type", "") or "") or (_get(case, "reason", "") or "").strip()
    return ErrorOrigin.DIFFTEST if legacy.startswith(LEGACY_INTERNAL) else ErrorOrigin.KERNEL


def plain_error_type(error_type: str) -> str:
    """``error_type`` without the older "internal:" mark (see ``error_origin``)."""
    return error_type[len(LEGACY_INTERNAL) :] if error_type.startswith(LEGACY_INTERNAL) else error_type


# a CUDA runtime error's name as its messages spell it: torch's AcceleratorError ("Search for
# `cudaErrorIllegalAddress'"), CuTe DSL's CUDADialectError ("Error name: cudaErrorIllegalAddress"),
# a launch failure ("CUDA launch failed: cudaErrorInvalidValue")
_CUDA_ERROR = re.compile(r"\bcudaError[A-Z]\w*")


def cuda_error_name(reason: str) -> str:
    """The CUDA runtime error a kernel error's message names first (``cudaErrorIllegalAddress``),
    "" when it names none."""
    m = _CUDA_ERROR.search(reason or "")
    return m.group(0) if m else ""


def failure_name(case) -> str:
    """What an error case (a CaseResult or a report's dict) failed with: the CUDA runtime error
    its message names, else the exception type. One device fault reaches Python through
    whichever layer noticed it first: on the H100 (2026-12-06) FA4 4.0.0b25's illegal address
    came back as torch's ``AcceleratorError`` in some cases and CuTe DSL's ``CUDADialectError``
    in others, two findings of one fault."""
    return cuda_error_name(_get(case, "reason", "") or "") or plain_error_type(_get(case, "error_type", "") or "")


def _error_kind(reason: str, error_type: str = "") -> Kind:
    """From the exception type the runner recorded (``CaseResult.error_type``); reports
    written before it was recorded are read from the reason's text."""
    if error_type:
        return {"KernelTimeout": Kind.HANG, "KernelCrashed": Kind.CRASH, "BuildTimeout": Kind.BUILD_TIMEOUT}.get(
            error_type, Kind.CONTRACT_VIOLATION
        )
    text = (reason or "").strip()
    head = text.splitlines()[0] if text else ""
    if head.startswith("KernelTimeout") or "KernelTimeout:" in head:
        return Kind.HANG
    if head.startswith("BuildTimeout") or "BuildTimeout:" in head:
        return Kind.BUILD_TIMEOUT
    if head.startswith("KernelCrashed") or "KernelCrashed:" in head:
        return Kind.CRASH
    return Kind.CONTRACT_VIOLATION


def overflow_limited(case) -> dict[str, int]:
    """Per output: elements accepted at the dtype's limits (the largest count any of its
    verdicts reports; the nonfinite and budget gates count the same elements)."""
    out: dict[str, int] = {}
    for v in _verdicts(case):
        n = int((v.get("numbers") or {}).get("overflow_limited", 0) or 0)
        if n:
            out[v["output"]] = max(out.get(v["output"], 0), n)
    return out


def classify(case) -> Kind:
    """The kind of one case (see the module docstring)."""
    status = str(_get(case, "status", ""))
    if status == Status.SKIPPED:
        return Kind.SKIPPED
    if status == Status.ERROR:
        if error_origin(case) == ErrorOrigin.DIFFTEST:
            return Kind.INTERNAL
        return _error_kind(_get(case, "reason", ""), _get(case, "error_type", "") or "")
    failed = [v for v in _verdicts(case) if not v.get("passed", True)]
    if status == Status.FAILED or failed:
        if failed and all(v.get("gate") == "missing" for v in failed):
            return Kind.DECLARATION  # an output declared but never returned (difftest/judge/declaration.py)
        if failed and all(v.get("gate") in _DETERMINISM for v in failed):
            return Kind.NONDETERMINISM
        return Kind.WRONG_RESULT
    return Kind.OVERFLOW_LIMITED if overflow_limited(case) else Kind.PASSED


def summarize(cases) -> dict:
    """{"kinds": {kind: cases}, "findings": cases that are findings,
    "overflow_limited": {output: elements}, "overflow_limited_cases": cases with any}."""
    kinds: Counter[str] = Counter()
    elems: Counter[str] = Counter()
    limited_cases = 0
    for c in cases:
        kinds[str(classify(c))] += 1
        ol = overflow_limited(c)
        if ol:
            limited_cases += 1
            elems.update(ol)
    return {
        "kinds": {str(k): kinds[str(k)] for k in Kind if kinds[str(k)]},
        "findings": sum(kinds[str(k)] for k in FINDINGS),
        "overflow_limited": dict(sorted(elems.items())),
        "overflow_limited_cases": limited_cases,
    }


def describe(summary: dict) -> str:
    """One short line: 'wrong result 2, crash 1, overflow-limited 3 (dq 5 elems)'."""
    kinds = summary.get("kinds", {})
    parts = [f"{k} {n}" for k, n in kinds.items() if k not in (Kind.PASSED, Kind.SKIPPED, Kind.OVERFLOW_LIMITED)]
    if summary.get("overflow_limited_cases"):
        elems = ", ".join(f"{o} {n}" for o, n in summary.get("overflow_limited", {}).items())
        parts.append(f"overflow-limited {summary['overflow_limited_cases']} ({elems} elems)")
    return ", ".join(parts) or "-"
