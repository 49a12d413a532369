#!/usr/bin/env bash
# Phase 4 on nvidia-h200-x2 (this session, after the verdict-trust changes): unseeded `gpu`
# surveys of >= 200 cases per kernel (scripts/device/survey.py: every failure kept, triaged,
# the first of each kind shrunk), new production kernels, TileOPs, determinism, the bench,
# the speed script, shards. Chain the calls while the machine is warm (bundles unpacked in
# /tmp/site stay there between calls):
#   A: carry .device/fa4.tar.xz .whl      FA4 (both modes), SDPA flash/efficient/math, Flex, the
#                                         Triton packages (fastflash, jvp-flash, flash-attention-triton)
#   B: carry .device/tilelang.tar.xz .device/fa3.tar.xz
#                                         TileLang (both variants, FA3 second reference), FA3, seed 004
#   C: carry .device/tileops.tar.xz       TileOPs GQA/MHA + determinism + bench vs FA3; shards
# Every lane is bounded (LANE_SECONDS) so a call ends inside the device's 600 s.
set -o pipefail
source scripts/device/setup.sh > /dev/null
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/pip.log 2>&1 || { tail $OUT/pip.log; exit 1; }
ls .whl/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >> $OUT/pip.log 2>&1
call=${1:?A, B or C}
# One GPU per lane; logs go into the results tarball (the device returns at most 8 files).
L=/tmp/camp/$call/logs; mkdir -p $L
lane() {
  local gpu=$1 name=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$gpu; timeout ${LANE_SECONDS:-500} "$@" ) > $L/$name.log 2>&1
}
pack() {
  cp $OUT/env.txt $OUT/pip.log $L/ 2>/dev/null
  tar -C /tmp/camp -cJf $OUT/$call-results.tar.xz $call
  for f in $L/*.log; do echo "== $f"; tail -n 6 $f; done | cut -c1-400
}
S="python3 scripts/device/survey.py --shrink 25 --max-shrinks 2"
export LANE_SECONDS=${LANE_SECONDS:-470}
T=${SURVEY_SECONDS:-380}
python3 -m difftest list > $L/list.txt 2>&1
case $call in
A)
  lane 0 fa4      $S --out /tmp/camp/A --seconds $T fa4 200 &
  lane 0 fa4fast  $S --out /tmp/camp/A --seconds $T fa4-fast 200 &
  for k in sdpa-flash sdpa-efficient sdpa-math flex fastflash jvp-flash flash-attention-triton; do
    lane 1 $k $S --out /tmp/camp/A --seconds $T $k 200 &
  done
  wait ;;
B)
  python3 -m difftest.kernels.tilelang.warm --target cuda --jobs 30 > $L/warm.log 2>&1; tail -n 2 $L/warm.log
  lane 0 tilelang-det $S --out /tmp/camp/B --seconds $T --second-reference fa3 --det-runs 20 tilelang-det 200 &
  lane 0 tilelang     $S --out /tmp/camp/B --seconds $T --second-reference fa3 tilelang 200 &
  lane 1 fa3          $S --out /tmp/camp/B --seconds $T fa3 200 &
  lane 1 seed004      env DIFFTEST_TILELANG_FILE=$PWD/.seed/seed004_kernel.py $S --out /tmp/camp/B --seconds $T --det-runs 20 tilelang-file 200 &
  wait ;;
C)
  lane 0 tileops-gqa  $S --out /tmp/camp/C --seconds $T --det-runs 20 tileops-gqa 200 &
  lane 0 tileops-mha  $S --out /tmp/camp/C --seconds $T --det-runs 20 tileops-mha 200 &
  wait
  lane 0 bench python3 -m difftest bench -k tileops-gqa -k fa3 --json /tmp/camp/C/bench.json --markdown /tmp/camp/C/bench.md ;;
*) echo "call: allowed A, B or C"; exit 2 ;;
esac
pack
