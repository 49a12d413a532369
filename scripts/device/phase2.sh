#!/usr/bin/env bash
# Phase 2 on nvidia-h200-x2: campaigns per kernel, determinism, bench; two lanes, one GPU each.
# Usage (repo root, on the device): bash scripts/device/phase2.sh P|Q|R
#   P: carry .device/tilelang.tar.xz + .device/fa3.tar.xz  (TileLang, FA3, SDPA, Flex)
#   Q: carry .device/fa4.tar.xz (FA3 still unpacked in /tmp/site from P while warm)  (FA4, bench)
#   R: carry .device/tileops.tar.xz  (TileOPs, pytest -n 2 with one GPU per worker)
set -o pipefail
source scripts/device/setup.sh > /dev/null
call=${1:?P, Q or R}
OUT=${OUT:-/tmp/out}
lane() {  # lane GPU NAME command...
  local gpu=$1 name=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$gpu; timeout ${LANE_SECONDS:-540} "$@" ) > $OUT/$call-$name.log 2>&1
}
case $call in
P)
  lane 0 tilelang python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/P0 --det-runs 20 tilelang:200:110 tilelang-det:200:110 &
  lane 1 others bash -c "python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/P1 --det-runs 20 fa3:200:45 sdpa-cudnn:120:35 sdpa-flash:120:20 sdpa-efficient:120:25 sdpa-math:120:20 flex-gqa:60:30; python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/P2 --det-runs 0 flex:100:70" &
  wait ;;
Q)
  lane 0 fa4 python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/Q0 --det-runs 20 fa4:200:100:fa3 &
  lane 1 bench bash -c "python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/Q1 --det-runs 20 fa4-fast:200:60 && python3 -m difftest bench -k fa3 -k fa4 -k fa4-fast -k tilelang -k tilelang-det -k sdpa-flash --json /tmp/camp/Q1/bench.json --markdown /tmp/camp/Q1/bench.md" &
  wait ;;
R)
  lane 0 tileops bash -c "python3 scripts/device/phase1.py tileops-gqa:noprobe tileops-mla:noprobe; python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/R0 --det-runs 5 tileops-gqa:60:60 tileops-mla:30:40; python3 -m difftest bench -k tileops-gqa --json /tmp/camp/R0/bench.json --markdown /tmp/camp/R0/bench.md" &
  python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/R-pip.log 2>&1  # entry point: the pytest plugin
  export DIFFTEST_GPU_CAMPAIGN_SECONDS=${CAMPAIGN_SECONDS:-20}
  lane 0,1 xdist python3 -m pytest -n 2 --difftest-gpu-per-worker --difftest-profile gpu --difftest-out /tmp/camp/R1 -m gpu tests/test_gpu_adapters.py -q -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} &
  wait ;;
esac
mkdir -p /tmp/camp; tar -C /tmp/camp -czf $OUT/$call-results.tgz $(cd /tmp/camp && ls -d $call* 2>/dev/null)
ls -la $OUT; tail -n 25 $OUT/$call-*.log
