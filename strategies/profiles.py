"""Size profiles: how large a drawn Problem may get, per kind of run.

A profile only ever narrows a kernel's Capability (``max_*`` there still bind). ``budget``
bounds ``Problem.size()`` (score elements x head dim), the cost of the O(S^2) float64
reference on a CPU; see ``shapes.seqlen_cap`` for the one place it is relaxed.
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Profile:
    name: str
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
    max_tokens: int = 2**14
    max_score_elements: int = 2**26

    def with_knobs(self, **knobs) -> "Profile":
        """This profile with some bounds overridden (None leaves a bound as is)."""
        changes = {k: v for k, v in knobs.items() if v is not None}
        for k, v in changes.items():
            if k not in _KNOBS:
                raise ValueError(f"unknown size knob {k!r}: allowed {sorted(_KNOBS)}")
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k}={v!r} is invalid: allowed an int >= 1")
        return replace(self, **changes)


PROFILES = {
    # seconds-long unit tests and shrink demonstrations
    "quick": Profile("quick", max_batch=2, max_varlen_batch=4, max_heads=4, max_seqlen=80,
                     max_head_dim=64, budget=2**18, max_pad_tail=8,
                     max_tokens=2**13, max_score_elements=2**24),
    # every CI run on a shared 2-core CPU: S <= 160, B <= 3, H <= 4
    "ci": Profile("ci", max_batch=3, max_varlen_batch=6, max_heads=4, max_seqlen=160,
                  max_head_dim=256, budget=2**22, max_pad_tail=16,
                  max_tokens=2**14, max_score_elements=2**26),
    "nightly": Profile("nightly", max_batch=8, max_varlen_batch=16, max_heads=16, max_seqlen=1024,
                       max_head_dim=512, budget=2**28, max_pad_tail=64,
                       max_tokens=2**17, max_score_elements=2**30),
    "gpu": Profile("gpu", max_batch=16, max_varlen_batch=64, max_heads=64, max_seqlen=8192,
                   max_head_dim=512, budget=2**34, max_pad_tail=256,
                   max_tokens=2**20, max_score_elements=2**36),
}

_KNOBS = ("max_batch", "max_varlen_batch", "max_heads", "max_seqlen", "max_head_dim", "budget",
          "max_pad_tail", "max_tokens", "max_score_elements")


def get_profile(profile) -> Profile:
    """A Profile from its name (or the Profile itself)."""
    if isinstance(profile, Profile):
        return profile
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} is invalid: allowed {sorted(PROFILES)}")
    return PROFILES[profile]
