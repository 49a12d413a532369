#!/usr/bin/env bash
# Issue 13 on ONE H200 (kind nvidia-h200): the new production-kernel adapters, campaigned in
# parallel lanes on GPU 0 (16 cores, 139 GB: Triton/TileLang compiles overlap), bounded by
# seconds. Two calls, because the bundles do not fit one carry (64 MiB): K1 carries tilelang
# (32 MiB) + the wheels + the seed file, K2 tileops (32 MiB) + fa3 (15 MiB) for the bench.
#
# Before K1, on this machine (the seed's kernel is NOT part of the project; .device/ is ignored):
#   sed -n 45,431p ../shared/seeds/004_c522d0269232d8c7.txt > .device/seed004_kernel.py
#   (= /work/scratch13/seed004_kernel.py; the posted example_gqa_bwd.py, lines 45-431 of the seed)
#
#   K1: carry .whl .device/tilelang.tar.xz .device/seed004_kernel.py
#       lanes: fastflash (+ det 20) then fastflash-atomic; jvp-flash then jvp-flash-mask;
#       flash-attention-triton (+ det 20) then -fast; seed 004 via tilelang-file: its edge-corpus
#       shapes built in parallel first (every shape is 4 TileLang compiles, ~60 s serially), then
#       two lanes with different seeds
#   K2: carry .device/tileops.tar.xz .device/fa3.tar.xz   (right after K1)
#       `difftest bench -k tileops-gqa -k fa3` alone first (timings without lane contention),
#       then lanes: tileops-gqa, tileops-mha (det 20 each), tileops-gqa-bwd (every head dim)
#
#   run(kind="nvidia-h200", timeout_s=420, carry=[...K1...],
#       command="LANE_SECONDS=300 bash scripts/device/kernels13.sh K1")
#   run(timeout_s=420, carry=[".device/tileops.tar.xz", ".device/fa3.tar.xz"],
#       command="LANE_SECONDS=230 BENCH_SECONDS=100 bash scripts/device/kernels13.sh K2")
# Each lane writes /tmp/camp/<call>-<lane>/{report.json,summary.md,determinism.json,repro/};
# everything comes back as $OUT/<call>-results.tgz plus $OUT/<call>-<lane>.log.
# Campaign specs are NAME:EXAMPLES:SECONDS (scripts/device/campaigns.py); a campaign stops at
# its first failure (then shrinks for --shrink seconds), so "cases" < EXAMPLES means a finding.
set -o pipefail
source scripts/device/setup.sh > /dev/null
call=${1:?K1 or K2}
source scripts/device/lane.sh
mkdir -p /tmp/camp
C="python3 scripts/device/campaigns.py --shrink 25"
# entry points (the new adapters, the tilelang-file catalogue) come from the package metadata
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/$call-pip.log 2>&1 || { tail $OUT/$call-pip.log; exit 1; }
# the three public packages (pure Python + Triton): installed beside the bundles
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >> $OUT/$call-pip.log 2>&1
  tail -n 3 $OUT/$call-pip.log
fi
python3 - <<'PY' >> $OUT/env.txt 2>&1
from importlib.metadata import version
for m in ("fastflash-attention", "jvp-flash-attention", "flash-attention-triton", "tilelang"):
    try: print(m, version(m))
    except Exception: print(m, "missing")
PY
T=${LANE_SECONDS:-300}
case $call in
K1)
  SEED=${DIFFTEST_TILELANG_FILE:-$PWD/.device/seed004_kernel.py}
  # Each package's whole claim first (its smallest head dims lead the edge corpus: fastflash
  # claims d1..d8, flash-attention-triton d1/d3, jvp d256 in fp32; a failure there stops that
  # campaign early and is a finding), then the same kernel narrowed to the tensor-core dims so
  # the rest of its contract is still exercised. Campaign seconds leave room in the lane for
  # shrinking (25 s each), determinism and the report.
  a=$((T * 30 / 100)); b=$((T * 18 / 100)); c=$((T * 10 / 100)); N="head_dims_qk=16,32,64,128"
  lane 0 ff $C --out /tmp/camp/K1-ff --det-runs 20 fastflash:400:$a fastflash:300:$b@$N fastflash-atomic:200:$c@$N &
  lane 0 jvp $C --out /tmp/camp/K1-jvp --det-runs 5 jvp-flash:400:$a jvp-flash:300:$b@$N jvp-flash-mask:200:$c@$N &
  lane 0 fat $C --out /tmp/camp/K1-fat --det-runs 20 flash-attention-triton:400:$a flash-attention-triton:300:$b@$N \
    flash-attention-triton-fast:200:$c@$N &
  if [ -f "$SEED" ]; then
    export DIFFTEST_TILELANG_FILE=$SEED TILELANG_CACHE_DIR=/tmp/tilelang-cache-seed004  # one cache for warm-up and lanes
    # every seed-004 shape is four TileLang compiles (~60 s serially): build the edge corpus's
    # shapes on 8 processes into TileLang's disk cache first, then two campaign lanes (different
    # seeds) that load them; the warm-up's time comes out of those lanes' budget
    W=$((T * 35 / 100)); s=$((T * 40 / 100))
    ( timeout -k 5 $W python3 -m difftest.kernels.tilelang_file --warm "$SEED" --jobs 8 > $OUT/K1-seedwarm.log 2>&1
      LANE_SECONDS=$((T - W - 5))
      lane 0 seedA $C --out /tmp/camp/K1-seedA --det-runs 20 tilelang-file:200:$s &
      lane 0 seedB $C --out /tmp/camp/K1-seedB --det-runs 0 --seed 7 tilelang-file:200:$s &
      wait ) &
  else
    echo "seed 004 kernel file $SEED missing: see the header of this script" | tee $OUT/K1-seed-missing.log
  fi
  wait ;;
K2)
  ( export CUDA_VISIBLE_DEVICES=0; timeout ${BENCH_SECONDS:-100} python3 -m difftest bench -k tileops-gqa -k fa3 \
      --json /tmp/camp/K2-bench.json --markdown /tmp/camp/K2-bench.md ) > $OUT/K2-bench.log 2>&1
  tail -n 12 $OUT/K2-bench.log
  a=$((T * 70 / 100))
  lane 0 gqa $C --out /tmp/camp/K2-gqa --det-runs 20 tileops-gqa:250:$a &
  lane 0 mha $C --out /tmp/camp/K2-mha --det-runs 20 tileops-mha:250:$a &
  lane 0 bwd $C --out /tmp/camp/K2-bwd --det-runs 5 tileops-gqa-bwd:250:$a &
  wait ;;
*) echo "call: allowed K1 or K2"; exit 2 ;;
esac
pack
