"""A run that checked nothing never passes.

A campaign can end having judged no case at all: a ``--time-budget`` spent before the
first draw, a narrowing or a capability that leaves every drawn Problem skipped, a
``--max-examples`` with the edge corpus off. Nothing failed, so it used to read
"passed" (exit 0) even on a kernel with a planted bug. Here a campaign that ran (not
unavailable), failed nothing and judged no case (every case skipped, or none) gets its
own status, ``CampaignStatus.NOTHING_CHECKED``, and a run, a pytest fixture call or a
gate's candidate in that state exits ``EXIT_NOTHING_CHECKED`` (3), never 0.

The fronts apply it where they judge results: ``run/plan.py`` when a campaign finishes
(the CLI and the pytest fixture), ``report/ci_gate.py`` on the candidate's records,
``report/merge.py`` on merged shards, the pytest plugin's items on a campaign record.
"""

from difftest.vocab import CampaignStatus, Status

JUDGED = (Status.PASSED, Status.FAILED, Status.ERROR)


def _status(case):
    return case.get("status") if isinstance(case, dict) else getattr(case, "status", None)


def checked(cases) -> int:
    """How many of ``cases`` (CaseResults or case records) were judged: passed, failed or errored."""
    return sum(1 for c in cases or () if _status(c) in JUDGED)


def checked_status(status, cases):
    """``status`` (a campaign's) as a run judges it: PASSED with no judged case is NOTHING_CHECKED."""
    if status == CampaignStatus.PASSED and not checked(cases):
        return CampaignStatus.NOTHING_CHECKED
    return status


def run_checked_nothing(statuses) -> bool:
    """Whether a run whose campaigns ended in ``statuses`` checked nothing: one of them judged
    no case, or none ran at all (no campaign, or every kernel unavailable)."""
    statuses = list(statuses)
    return any(s == CampaignStatus.NOTHING_CHECKED for s in statuses) or all(
        s == CampaignStatus.UNAVAILABLE for s in statuses
    )
