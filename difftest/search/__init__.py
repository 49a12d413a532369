"""The campaign: Hypothesis draws Problems, shrinks failures (shrinking), keeps them (failure store,
findings, reproducers), writes its case log, under a profile's budgets (model/profiles.py), seeded or
sharded."""
