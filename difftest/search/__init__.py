"""The campaign: Hypothesis draws Problems, shrinks failures (shrinking), keeps them (failure store,
findings, reproducers), under a profile's budgets, seeded or sharded."""
