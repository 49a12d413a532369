#!/usr/bin/env bash
# Device call (2026-12-07, session 6): replay each cuDNN 9.19 reproducer of this afternoon's unattended nightly
# (s5-wide) twice, each in a fresh process, to triage the findings whose signature "fails on every variation":
# a real fault fails in a fresh process too; state left by an earlier case in the kernel process would not.
# Carry: .device/cudnn.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu (.gpu/repro/*.json).
set -u
. scripts/device/cudnn-setup.sh
for f in .gpu/repro/*.json; do for i in 1 2; do
  echo "== $(basename $f) run $i"; timeout 90 python3 -m difftest repro $f > $W/r.log 2>&1; echo "exit $?"
  grep -E "FAILED|PASSED|passed|triage|budget|nonfinite|determinism|error" $W/r.log | cut -c1-260 | head -8
done; done 2>&1 | tee $OUT/replay.txt
