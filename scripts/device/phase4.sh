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
#   C: carry .device/fa4.tar.xz .whl      FA4 standalone reproducers, FA4 narrowed around its findings,
#                                         the Triton packages, SDPA replays
#   D: carry .device/tileops.tar.xz .device/fa3.tar.xz .seed
#                                         TileOPs GQA/MHA + determinism + bench vs FA3, seed 004 (tilelang 0.1.12)
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
export LANE_SECONDS=${LANE_SECONDS:-270}
T=${SURVEY_SECONDS:-200}
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
  R=results/h200/phase4
  FA4_NARROW="--narrow head_dims_qk=24,32,40,48,56,64,72,80,96,112,128,160,192,224,256 --narrow head_dims_v=24,32,40,48,56,64,72,80,96,112,128,160,192,224,256 --narrow equal_head_dims=true"
  lane 0 fa4-repro bash -c "cd results/bugs/fa4 && for c in d8 d8_tiny d16_8 d8_16 d64_ok gqa_unequal d104 d80_216_gqa d32_120 sink_lse; do python3 repro_fa4.py \$c 2>&1 | grep -E '^\\{|Error' | tail -n 2; done" &
  lane 0 fa4n $S --out /tmp/camp/C --seconds $T $FA4_NARROW fa4 200 &
  for k in fastflash fastflash-atomic jvp-flash jvp-flash-mask flash-attention-triton; do
    lane 1 $k $S --out /tmp/camp/C --seconds $T $k 200 &
  done
  lane 1 replays bash -c "python3 results/bugs/sdpa-flash/repro_sdpa_flash_dk_inf.py; for f in $R/A/repro/*.json; do echo == \$f; python3 -m difftest repro \$f | tail -n 12; done" &
  wait ;;
D)
  export PYTHONPATH=$PYTHONPATH:/tmp/site
  lane 0 tileops-gqa $S --out /tmp/camp/D --seconds $T --det-runs 20 tileops-gqa 200 &
  lane 1 tileops-mha $S --out /tmp/camp/D --seconds $T --det-runs 20 tileops-mha 200 &
  lane 1 seed004 env PYTHONPATH=/tmp/tileops_site:$PWD DIFFTEST_TILELANG_FILE=$PWD/.seed/seed004_kernel.py $S --out /tmp/camp/D --seconds $T --det-runs 20 tilelang-file 200 &
  ( mkdir -p /tmp/camp/D/gate; OUT=/tmp/camp/D/gate timeout $LANE_SECONDS bash scripts/device/gate_gpu.sh > $L/gate.log 2>&1 ) &
  wait
  lane 0 bench python3 -m difftest bench -k tileops-gqa -k fa3 --json /tmp/camp/D/bench.json --markdown /tmp/camp/D/bench.md ;;
*) echo "call: allowed A, B or C"; exit 2 ;;
esac
pack
