"""The words verdicts are made of: case and campaign statuses, gate names, failure kinds
and mutant outcomes, as ``enum.StrEnum``.

Each member *is* its string ("passed", "budget", ...): JSON reports, reproducers and
comparisons with plain strings stay byte-for-byte what they were, while the engine gets
one list of the allowed values, a typo that fails at import instead of a check that is
never true, and a clear error for an unknown value read back from a report.
"""

from enum import StrEnum


class Status(StrEnum):
    """What one case (a kernel on one Problem) came to."""

    PASSED = "passed"
    FAILED = "failed"  # a gate failed
    ERROR = "error"  # the kernel raised, crashed or hung (or a reference did: ``ErrorOrigin.DIFFTEST``)
    SKIPPED = "skipped"  # outside the kernel's capability, or the kernel is unavailable here

    @property
    def failed(self) -> bool:
        return self in (Status.FAILED, Status.ERROR)


class CampaignStatus(StrEnum):
    """What one kernel's campaign came to."""

    PASSED = "passed"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"  # the kernel cannot run here (reason given)
    INTERRUPTED = "interrupted"  # SIGINT/SIGTERM before it finished, no failure found (partial)
    NOTHING_CHECKED = "nothing checked"  # ran, failed nothing, judged no case: never a pass (report/checked.py)


class RunStatus(StrEnum):
    """What a run (``OUT/runs/<id>/run.json``) came to; ``--resume`` continues any but FINISHED."""

    RUNNING = "running"  # started; still running, or killed
    FINISHED = "finished"
    INTERRUPTED = "interrupted"  # SIGINT/SIGTERM or a lost campaign process: a partial report


class Gate(StrEnum):
    """Gate names on a Verdict (``gates.py``, ``determinism.py``)."""

    BUDGET = "budget"  # error against the float64 truth within k x the same-dtype reference's (+ floor)
    ELEMENTWISE = "elementwise"  # a kernel team's atol/rtol standard
    NONFINITE = "nonfinite"  # NaN/Inf parity with the truth
    POISON = "poison"  # an output element the kernel never wrote
    SHAPE = "shape"  # an output of the wrong shape
    MISSING = "missing"  # a declared output not returned: a declaration problem (declaration.py)
    DETERMINISM = "determinism"  # bitwise-equal repeated calls, for a kernel that claims determinism
    DETERMINISM_INFO = "determinism_info"  # the same measurement for a kernel that does not claim it: never fails
    SECOND_REFERENCE = "second_reference"  # the budget gate against a second reference kernel (e.g. FA3)


RATIO_GATES = frozenset({Gate.BUDGET, Gate.SECOND_REFERENCE})  # gates whose number is an error ratio
# the largest error ratio a case or a report keeps: a non-finite or larger one is reported as
# this (hypothesis.target needs a finite number; every report prints it as 1e+06)
RATIO_CAP = 1e6

# the reason's prefix of a case skipped because the GPU's memory ran out twice (judge/device_memory.py)
DEVICE_MEMORY_SKIP = "device memory ran out"


class FailureKind(StrEnum):
    """How a failing case fails; shrinking keeps to the first failure's kind (``campaign.same_failure``):
    a gate failure shrinks into Problems failing one of the same gates, an error into errors of the same
    exception type (``CaseResult.error_type``)."""

    GATE = "gate"
    ERROR = "error"


class ErrorOrigin(StrEnum):
    """Whose exception an error case is (``CaseResult.error_origin``)."""

    KERNEL = "kernel"  # the kernel raised, crashed, hung or timed out building: a finding
    DIFFTEST = "difftest"  # a reference or gate of difftest's own failed: difftest's bug, not the kernel's


class ErrorSource(StrEnum):
    """Where a backward output's error comes from (``judge/attribution.py``)."""

    FORWARD = "forward"  # right for the O/LSE the kernel stored, and those are wrong
    STORED_ROUNDING = "stored-rounding"  # right for the O/LSE it stored, which pass: a correct design
    BACKWARD = "backward"  # wrong even for the statistics it was handed
    UNKNOWN = "unknown"  # no O/LSE to rebuild from, or the rebuild failed


class TriageKind(StrEnum):
    """What kind of finding a case is, as a kernel team sorts them (``judge/triage.py``)."""

    PASSED = "passed"
    OVERFLOW_LIMITED = "overflow-limited"
    WRONG_RESULT = "wrong result"
    NONDETERMINISM = "nondeterminism"
    DECLARATION = "declaration problem"
    CONTRACT_VIOLATION = "contract violation"
    CRASH = "crash"
    HANG = "hang"
    BUILD_TIMEOUT = "build timeout"
    INTERNAL = "difftest error"
    SKIPPED = "skipped"


class FindingKind(StrEnum):
    """What ``difftest gate`` found comparing a candidate report with a baseline (``report/ci_gate.py``)."""

    REGRESSION = "regression"  # a gate the baseline passed fails
    RATIO = "ratio"  # a budget ratio grew past the allowed growth
    DETERMINISM = "determinism"
    COVERAGE = "coverage"  # the candidate checked less than the baseline
    SETTINGS = "settings"  # the two were judged under different gate settings
    KNOWN = "known"  # failing in both: listed, not blocking
    INCOMPLETE = "incomplete"  # not reached: listed, not blocking
    NOTHING_CHECKED = "nothing checked"  # the candidate (or a kernel of it) judged no case: never a pass


class MutantStatus(StrEnum):
    """A mutant's row in ``difftest mutants``."""

    KILLED = "killed"
    SURVIVED = "survived"
    SPURIOUS = "spurious"  # "killed" on a Problem the clean kernel fails too: counts as a survivor
    ERROR = "error"  # the engine crashed on this mutant
    UNAVAILABLE = "unavailable"
