#!/usr/bin/env bash
# Issue 12 on one H200: the float64 truth next to FA3, and 200-case gpu campaigns with the
# time split (where a campaign's wall time goes). Two calls, because the bundles do not fit
# one carry (64 MiB): PART=tilelang (carry .device/tilelang.tar.xz .device/fa3.tar.xz) and
# PART=fa4 (carry .device/fa4.tar.xz). Everything lands under $OUT; typically ~6.5 min
# (tilelang) and ~7 min (fa4); every step has a timeout, so neither exceeds the 600 s call limit.
#
#   bash scripts/device/speed.sh tilelang          (timeouts sum to 550 s + setup)
#     0. warm (<= 2 min): every TileLang CUDA kernel built into the disk cache, 14 jobs
#     1. campaign (<= 3.7 min): tilelang-det, gpu profile, 200 examples, unseeded, warm cache,
#        search budget 180 s: the report with its time split and compile reuse
#        (tilelang-det/report.json, tilelang-det.log)
#     2. oracle (<= 2.5 min + 1 min): difftest bench --oracle, B1 H8 D128 causal bf16, S=4k..128k: truth
#        seconds, peak GiB, chunks, FA3 backward and truth/FA3 (oracle.{json,md,log}); then at
#        S=4k,16k,32k the truth with and without block skipping in one run (oracle-unskipped.*)
#        and, where the copy has git history, the oracle of 1b4920a (before this work) beside
#        today's (scripts/oracle_before_after.py, oracle-before-after.{json,log})
#   bash scripts/device/speed.sh fa4               (about 7.5 minutes at most)
#     campaign (<= 7 min): fa4, gpu profile, 200 examples, search budget 330 s (fa4/report.json, fa4.log)
set -o pipefail
part=${1:?tilelang or fa4}
source scripts/device/setup.sh > /dev/null
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
split() {  # print a report's time split and compile reuse
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["campaigns"]:
    t = c.get("timing") or {}
    print(c["kernel"], c["status"], "cases", c.get("examples"), "elapsed", c.get("elapsed_s"),
          "reuse", json.dumps(c.get("compile_reuse")))
    for n, s in sorted((t.get("phases_s") or {}).items(), key=lambda kv: -kv[1]):
        print(f"  {n:<12} {s:8.2f} s  {100 * t['share'][n]:5.1f}%")
    if t:
        print(f"  framework overhead {t['overhead_s']:.1f} s = {100 * t['overhead_share']:.1f}% of {t['wall_s']:.1f} s")
PY
}
case $part in
tilelang)
  timeout 120 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $OUT/warm.log 2>&1
  echo "warm exit $?"; tail -n 1 $OUT/warm.log
  timeout 220 python3 -m difftest run -k tilelang-det -p gpu --device cuda --max-examples 200 --time-budget 180 \
      --shrink-budget 20 --out $OUT/tilelang-det --db /tmp/speed-db > $OUT/tilelang-det.log 2>&1
  echo "campaign exit $?"; grep -v "^tilelang-det  *[a-z]" $OUT/tilelang-det.log | tail -n 25
  split $OUT/tilelang-det/report.json
  timeout 150 python3 -m difftest bench --oracle -k fa3 --json $OUT/oracle.json --markdown $OUT/oracle.md \
      > $OUT/oracle.log 2>&1; echo "oracle exit $?"; cat $OUT/oracle.log
  S3="--shape 1,8,4096,128 --shape 1,8,16384,128 --shape 1,8,32768,128"
  timeout 60 python3 -m difftest bench --oracle --unskipped -k fa3 $S3 --json $OUT/oracle-unskipped.json \
      --markdown $OUT/oracle-unskipped.md > $OUT/oracle-unskipped.log 2>&1; echo "unskipped exit $?"
  cat $OUT/oracle-unskipped.log
  if git rev-parse -q --verify 1b4920a^{commit} > /dev/null 2>&1; then
    timeout 40 python3 scripts/oracle_before_after.py --rev 1b4920a --device cuda --repeats 1 $S3 \
        --json $OUT/oracle-before-after.json > $OUT/oracle-before-after.log 2>&1
    echo "before/after exit $?"; cat $OUT/oracle-before-after.log
  else
    echo "no git history in this copy: oracle before/after skipped (the issue's figures are the before)"
  fi ;;
fa4)
  timeout 420 python3 -m difftest run -k fa4 -p gpu --device cuda --max-examples 200 --time-budget 330 \
      --shrink-budget 30 --out $OUT/fa4 --db /tmp/speed-db > $OUT/fa4.log 2>&1
  echo "campaign exit $?"; grep -v "^fa4  *[a-z]" $OUT/fa4.log | tail -n 25; split $OUT/fa4/report.json ;;
*) echo "speed.sh: part=$part: allowed tilelang or fa4"; exit 2 ;;
esac
