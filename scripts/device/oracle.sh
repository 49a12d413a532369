#!/usr/bin/env bash
# Issue 12 part 3 on one H200, one call of at most ~2 minutes (timeouts sum to 120 s):
#   source scripts/device/setup.sh && bash scripts/device/oracle.sh     (carry .device/fa3.tar.xz)
#  1. difftest bench --oracle -k fa3: B1 H8 D128 causal bf16, S = 4k, 16k, 32k, 64k, 128k: the
#     float64 truth as the runner calls it (float32/TF32 magnitudes) with its peak memory and
#     chunks, FA3's backward on the same Problem (timed past FA3's campaign max_seqlen=8192:
#     speed only, the row says so) and truth/FA3 (oracle.{json,md,log}).
#  2. scripts/oracle_before_after.py at S = 16k, 64k, 128k: the oracle before this work
#     (scripts/oracle_chunked_759dd0c.py, a committed copy: the device copy has no git
#     history), today's with float64 magnitudes (--mag64) and today's as the runner calls it,
#     alternated on the same inputs in one process, with peak memory and the largest value /
#     magnitude differences (oracle-before-after.{json,log}). Rows print as they finish, so a
#     timeout still leaves the finished ones.
#  3. scripts/device/oracle_profile.py: one truth call at 16k under torch.profiler, the CUDA
#     kernels by GPU time (GEMMs vs elementwise passes): what to fuse next (oracle-profile.log).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
timeout 65 python3 -m difftest bench --oracle -k fa3 --repeats 10 --json $OUT/oracle.json \
    --markdown $OUT/oracle.md > $OUT/oracle.log 2>&1
echo "oracle bench exit $?"; cat $OUT/oracle.log; echo; cat $OUT/oracle.md 2>/dev/null
timeout 35 python3 scripts/oracle_before_after.py --device cuda --repeats 1 --mag64 \
    --shape 1,8,16384,128 --shape 1,8,65536,128 --shape 1,8,131072,128 \
    --json $OUT/oracle-before-after.json > $OUT/oracle-before-after.log 2>&1
echo "before/after exit $?"; cat $OUT/oracle-before-after.log
timeout 20 python3 scripts/device/oracle_profile.py > $OUT/oracle-profile.log 2>&1
echo "profile exit $?"; cat $OUT/oracle-profile.log
