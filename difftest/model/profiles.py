"""Profiles: every number a kind of run (quick, ci, nightly, gpu) fixes, in one table.

A Profile holds how large a drawn Problem may get (read by ``strategies``), how many
examples a campaign draws, its search and shrink seconds and its seed (read by
``campaign``), and the per-mutant budgets of ``difftest mutants`` (read by ``mutants``).
One table, so a name means the same run everywhere and an unknown name fails in one line
(``get_profile``) instead of quietly becoming another profile. It lives in ``model``,
below both ``strategies`` and ``search``, which read it.

Sizes only ever narrow a kernel's Capability (``max_*`` there still bind). ``budget``
bounds ``Problem.size()`` (score elements x head dim), the cost of the O(S^2) float64
reference on a CPU; see ``strategies.shapes.seqlen_cap`` for the one place it is relaxed.
"""

from dataclasses import dataclass, replace
from typing import Any

from difftest.errors import InputError


@dataclass(frozen=True)
class Profile:
    name: str
    # --- sizes of drawn Problems (strategies)
    max_batch: int  # dense batches
    max_varlen_batch: int  # varlen batches ("many short sequences" needs more than a few)
    max_heads: int  # heads_q
    max_seqlen: int
    max_head_dim: int  # larger capability head dims are drawn only up to this
    budget: int  # bound on Problem.size()
    max_pad_tail: int  # unused tokens after the last cu_seqlens offset
    # hard limits on any Problem run under this profile (drawn, replayed from the failure
    # store or a reproducer file): packed tokens incl. pad_tail, and score elements
    # sum(seqlen_q * seqlen_k) * heads_q; beyond them a Problem is refused with a message
    # (difftest/search/limits.py)
    # GQA draws (heads_kv >= 2, group >= 2) reach this many query heads even where max_heads is
    # lower: a dK/dV reduced over the wrong group shows only with group >= 3 and >= 2 KV heads
    # (8/2), and a profile that capped GQA at 4/2 never drew it while calling every feature run
    max_gqa_heads: int = 8
    max_tokens: int = 2**14
    max_score_elements: int = 2**26
    # --- a campaign (campaign.run_campaign)
    examples: int = 40  # generated examples (the edge corpus runs on top)
    search_s: float = 150.0  # wall-clock seconds the whole campaign may take (search, shrinking, signatures)
    shrink_s: float = 60.0  # seconds one failure's shrink may take (inside search_s)
    seed: int | None = 0  # None: a fresh random search each run
    # go on after a failure, one finding per distinct bug (campaign.py, signature.py); off: the
    # first failure ends the search, as CI and the gate want (the same finding every run)
    hunt: bool = False
    # the coverage phase (difftest/search/configuration_phase.py): 0 none, 1 every value of every
    # configuration dimension once, 2 every pair of values, 3 also every triple of the small dimensions
    coverage: int = 0
    # a hunt that draws again while its budget lasts (it does not stop at ``examples``)
    fill_budget: bool = False
    # compile configurations a JIT kernel on a CPU target may draw (strategies/compile.py):
    # "open" draws a fresh one with probability 0.1; "corpus" only the edge corpus's plus one
    # per compile-key value it lacks, all built before the campaign by `difftest run`'s
    # prebuild (CPU builds take seconds each); a campaign then reports the feature
    # compile:new_configuration as not exercised
    cpu_compile_configs: str = "open"
    # --- difftest mutants (per mutant: search and shrink seconds; the whole catalogue's total)
    mutant_search_s: float = 90.0
    mutant_shrink_s: float = 20.0
    mutant_total_s: float = 900.0
    # how far the search reaches: a mutant whose catalogue ``profile`` reaches further than
    # the run's is run and shown but not counted as a survivor
    mutant_reach: int = 0

    def with_knobs(self, **knobs: Any) -> "Profile":
        """This profile with some size bounds overridden (None leaves a bound as is)."""
        changes = {k: v for k, v in knobs.items() if v is not None}
        for k, v in changes.items():
            if k not in SIZE_KNOBS:
                raise InputError(f"unknown size knob {k!r}: allowed {sorted(SIZE_KNOBS)}")
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{k}={v!r} is invalid: allowed an int >= 1")
        if "max_heads" in changes:  # an explicit head cap binds GQA draws too
            changes["max_gqa_heads"] = min(self.max_gqa_heads, changes["max_heads"])
        return replace(self, **changes)


PROFILES = {
    # seconds-long unit tests and shrink demonstrations
    "quick": Profile(
        "quick",
        max_batch=2,
        max_varlen_batch=4,
        max_heads=4,
        max_seqlen=80,
        max_head_dim=64,
        budget=2**18,
        max_pad_tail=8,
        max_tokens=2**13,
        max_score_elements=2**24,
        examples=12,
        search_s=60.0,
        shrink_s=30.0,
        seed=0,
        mutant_search_s=10.0,
        mutant_shrink_s=5.0,
        mutant_total_s=600.0,
    ),
    # every CI run on a shared 2-core CPU: S <= 160, B <= 3, H <= 4. The mutant total must
    # fit CI's 90 minutes with everything else and keep the default CI run under 20
    # minutes; the catalogue normally needs a small fraction of it.
    "ci": Profile(
        "ci",
        max_batch=3,
        max_varlen_batch=6,
        max_heads=4,
        max_seqlen=160,
        max_head_dim=256,
        budget=2**22,
        max_pad_tail=16,
        max_tokens=2**14,
        max_score_elements=2**26,
        examples=40,
        search_s=150.0,
        shrink_s=60.0,
        seed=0,
        cpu_compile_configs="corpus",
        coverage=1,
        mutant_search_s=90.0,
        mutant_shrink_s=20.0,
        mutant_total_s=900.0,
    ),
    "nightly": Profile(
        "nightly",
        max_batch=8,
        max_varlen_batch=16,
        max_heads=16,
        max_seqlen=1024,
        max_head_dim=512,
        budget=2**28,
        max_pad_tail=64,
        max_tokens=2**17,
        max_score_elements=2**30,
        examples=1000,
        search_s=3600.0,
        shrink_s=600.0,
        seed=None,
        hunt=True,
        coverage=3,
        fill_budget=True,
        mutant_search_s=120.0,
        mutant_shrink_s=60.0,
        mutant_total_s=7200.0,
        mutant_reach=1,
    ),
    "gpu": Profile(
        "gpu",
        max_batch=16,
        max_varlen_batch=64,
        max_heads=64,
        max_seqlen=8192,
        max_head_dim=512,
        budget=2**34,
        max_pad_tail=256,
        max_tokens=2**20,
        max_score_elements=2**36,
        examples=200,
        search_s=900.0,
        shrink_s=180.0,
        seed=None,
        hunt=True,
        coverage=3,
        fill_budget=True,
        mutant_search_s=120.0,
        mutant_shrink_s=60.0,
        mutant_total_s=7200.0,
        mutant_reach=1,
    ),
}

SIZE_KNOBS = (
    "max_batch",
    "max_varlen_batch",
    "max_heads",
    "max_seqlen",
    "max_head_dim",
    "budget",
    "max_pad_tail",
    "max_tokens",
    "max_score_elements",
)


def get_profile(profile: "Profile | str") -> Profile:
    """A Profile from its name (or the Profile itself); an unknown name raises ValueError
    naming the allowed ones."""
    if isinstance(profile, Profile):
        return profile
    if not isinstance(profile, str) or profile not in PROFILES:
        raise InputError(f"profile={profile!r} is invalid: allowed {sorted(PROFILES)}")
    return PROFILES[profile]
