#!/usr/bin/env bash
# Issue 12, framework overhead of a GPU campaign, after the input generator (input_version 2,
# drawn on the device), the gates' batched host reads and the thread default: the same
# campaign as results/h200/phase5/P1/one (tilelang-det, gpu profile, 200 examples,
# unseeded, --db none), its time split printed next to P1's, then make_inputs v1/v2 and
# check_outputs on the GPU over P1's own Problems (scripts/bench_inputs.py).
# First tests/test_counter_rng.py, whose gpu test checks that CPU and GPU draw identical bytes.
# One H200, carry .device/tilelang.tar.xz; every step has a timeout (sum 245 s + pip; typically ~170 s).
#   bash scripts/device/overhead.sh          (after: source scripts/device/setup.sh)
# Writes under $OUT: identity.log, overhead/report.json, overhead.log, warm.log, bench.{json,md,log}.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
[ -n "$DIFFTEST_TILEOPS_SITE" ] || source scripts/device/setup.sh > /dev/null
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/pip.log 2>&1 || { tail $OUT/pip.log; exit 1; }
t0=$(date +%s)
stamp() { echo "$(date -u +%T) +$(( $(date +%s) - t0 )) s: $*"; }
split() {  # a report's time split, with P1's (before) beside it when given
  python3 - "$@" <<'PY'
import json, lzma, sys
def load(p):
    return json.load(lzma.open(p, "rt") if p.endswith(".xz") else open(p))
now = load(sys.argv[1])["campaigns"][0]
before = load(sys.argv[2])["campaigns"][0] if len(sys.argv) > 2 else None
def line(c):
    return f"{c.get('examples')} cases, {c.get('elapsed_s')} s, {c['status']}"
print("after :", line(now)); before and print("before:", line(before), "(results/h200/phase5/P1/one)")
t, b = now.get("timing") or {}, (before or {}).get("timing") or {}
print(f"  {'phase':<12} {'after s':>8} {'share':>6} {'s/case':>7}   {'before s':>8} {'share':>6} {'s/case':>7}")
for n, s in sorted((t.get("phases_s") or {}).items(), key=lambda kv: -kv[1]):
    row = f"  {n:<12} {s:8.2f} {100 * t['share'][n]:5.1f}% {s / max(1, now['examples']):7.4f}"
    if b:
        bs = b["phases_s"].get(n, 0.0)
        row += f"   {bs:8.2f} {100 * b['share'].get(n, 0.0):5.1f}% {bs / max(1, before['examples']):7.4f}"
    print(row)
if t:
    print(f"  framework overhead {t['overhead_s']:.1f} s = {100 * t['overhead_share']:.1f}% of {t['wall_s']:.1f} s"
          + (f"   (before {b['overhead_s']:.1f} s = {100 * b['overhead_share']:.1f}% of {b['wall_s']:.1f} s)" if b else ""))
print("  compile reuse", json.dumps(now.get("compile_reuse")))
PY
}
stamp "start; threads: $(nproc) cores"
# the guarantee first: the same Problem gives the same bytes on the GPU and the CPU (every dtype and value mode)
timeout 25 python3 -m pytest -q -p no:cacheprovider tests/test_counter_rng.py > $OUT/identity.log 2>&1
stamp "inputs CPU/GPU identity (tests/test_counter_rng.py, incl. the gpu test) exit $?"; tail -n 3 $OUT/identity.log
timeout 40 python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 14 > $OUT/warm.log 2>&1
stamp "tilelang warm exit $?"
timeout 135 python3 -m difftest run -k tilelang-det -p gpu --device cuda --max-examples 200 --time-budget 105 \
    --shrink-budget 20 --out $OUT/overhead --db none > $OUT/overhead.log 2>&1
stamp "campaign exit $?"
grep -v "^tilelang-det  *[a-z]" $OUT/overhead.log | tail -n 22
split $OUT/overhead/report.json results/h200/phase5/P1/one/report.json.xz
timeout 45 python3 scripts/bench_inputs.py --device cuda --stride 4 --limit 236 --max-elements 60000000 --repeats 1 \
    --json $OUT/bench.json --markdown $OUT/bench.md > $OUT/bench.log 2>&1
stamp "bench exit $?"; cat $OUT/bench.log
