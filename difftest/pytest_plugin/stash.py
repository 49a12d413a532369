"""What the plugin keeps on pytest's config between hooks. Light on purpose: the plugin's hooks
run in every pytest session of anyone who installs difftest, and read these keys without
importing the run machinery (session.py: RunPlan, reports), which loads on a campaign's first use."""

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # annotations only: the run machinery loads on a campaign's first use
    from difftest.run.plan import RunPlan  # noqa: F401 (named in a string below, which ruff does not read)

RESULTS_KEY = pytest.StashKey[list]()  # every CampaignResult of this process, for the summary table
PLAN_KEY = pytest.StashKey["RunPlan"]()  # the session's RunPlan (session.plan), made on first use
