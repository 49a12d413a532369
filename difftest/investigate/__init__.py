"""Investigating one kernel beyond a campaign: a reproducer bisected across versions (bisect), an
adapter probed across its capability (probe), race stress (stress), compute-sanitizer runs
(sanitize). measure/ beside it holds evidence about difftest itself."""
