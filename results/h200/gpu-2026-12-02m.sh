#!/usr/bin/env bash
# H200 call M (2026-12-02, session 4): controls for call L's cuDNN FP8 dQ report: racecheck on
# sequence lengths that are right (64, 128) beside a wrong one (33), memcheck with 4 heads, and each
# row's dQ error where the remainder of seqlen_q mod 16 is 15, 1, 8 (1 and 4 heads).
set -u
D=.device/callK
mkdir -p /tmp/site && python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
R=results/bugs/cudnn/repro_cudnn_fp8_dq_partial_rows.py
for a in "15 128 1" "17 128 1" "24 128 1" "33 128 4" "33 127 4"; do timeout 60 python3 $R $a; done > $OUT/rows.log 2>&1
for a in "128 128" "64 64" "33 128"; do
  echo "== racecheck $a"; timeout 90 compute-sanitizer --tool racecheck python3 $R $a 2>&1 | grep -E "^b1|SUMMARY|Race reported" | sort | uniq -c | head -8
done > $OUT/racecheck.log 2>&1
echo "== memcheck 33 128 4" >> $OUT/racecheck.log
timeout 90 compute-sanitizer --tool memcheck python3 $R 33 128 4 2>&1 | grep -E "^b1|SUMMARY|Invalid" | head -5 >> $OUT/racecheck.log
cut -c1-600 $OUT/rows.log; cat $OUT/racecheck.log | cut -c1-250
