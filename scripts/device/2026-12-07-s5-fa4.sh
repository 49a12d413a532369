#!/usr/bin/env bash
# Device call (2026-12-07, session 5): issue 39's unattended FA4 nightlies after the budget-cut signature fix
# (ce3435b: a cut signature holds what it did not measure; two triggers of one error stay two findings), the OOM
# handling (f38a231), the folds (0d02440) and the far-end head-dim variation (0dbe261), none yet run on a GPU.
# One unattended `nightly` per beta, nothing narrowed: b25 in 4 shards (the empty-sequence launch failure was
# swallowed last time), b40 (the newest on the registry) and b36 (the bundle's own) in 3 each.
# Carry: .device/fa4.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/fa4b25, .whl/fa4b40, .gpu.
# Writes $OUT (env.txt, summary.txt, fa4-reports.tar.xz).
# The script as it ran then is in git history (2026-12-07); it is now the s8 script with these betas.
BETAS="25:4 40:3 36:3" exec bash scripts/device/2026-12-07-s8-fa4.sh
