"""The size profiles the strategies draw under: ``difftest.search.profiles`` holds the one
table (sizes, example counts, time budgets, seeds, mutant budgets); this module only
names it for the strategies."""

from difftest.search.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "get_profile"]
