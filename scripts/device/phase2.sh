#!/usr/bin/env bash
# Phase 2 on nvidia-h200-x2: campaigns per kernel, determinism, bench; two lanes, one GPU each.
# Usage (repo root, on the device), chained while the machine is warm: Q, then P, then R
#   Q: carry .device/fa4.tar.xz  (FA4 both modes, Flex)
#   P: carry .device/tilelang.tar.xz .device/fa3.tar.xz  (TileLang with FA3 as second reference,
#      FA3, SDPA backends, Flex GQA; bench of FA3/FA4/TileLang, FA4 still unpacked from Q)
#   R: carry .device/tileops.tar.xz  (TileOPs, pytest -n 2 with one GPU per worker)
set -o pipefail
source scripts/device/setup.sh > /dev/null
call=${1:?Q, P or R}
source scripts/device/lane.sh
case $call in
Q)  # carry .device/fa4.tar.xz
  lane 0 fa4 python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/Q0 --det-runs 20 fa4:200:100 &
  lane 1 fa4fast bash -c "python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/Q1 --det-runs 20 fa4-fast:200:60; python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/Q2 --det-runs 0 flex:100:70" &
  wait ;;
P)  # carry .device/tilelang.tar.xz .device/fa3.tar.xz (fa4 still unpacked from Q while warm)
  lane 0 tilelang python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/P0 --det-runs 20 tilelang:200:100:fa3 tilelang-det:200:100:fa3 &
  lane 1 others bash -c "python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/P1 --det-runs 20 fa3:200:45 sdpa-cudnn:120:35 sdpa-flash:120:20 sdpa-efficient:120:25 sdpa-math:120:20 flex-gqa:60:30; python3 -m difftest bench -k fa3 -k fa4 -k fa4-fast -k tilelang -k tilelang-det -k sdpa-flash --json /tmp/camp/P1/bench.json --markdown /tmp/camp/P1/bench.md" &
  wait ;;
R)  # carry .device/tileops.tar.xz
  lane 0 tileops bash -c "python3 scripts/device/phase1.py tileops-gqa:noprobe tileops-mla:noprobe; python3 scripts/device/campaigns.py --shrink 35 --out /tmp/camp/R0 --det-runs 5 tileops-gqa:60:60 tileops-mla:30:40; python3 -m difftest bench -k tileops-gqa --json /tmp/camp/R0/bench.json --markdown /tmp/camp/R0/bench.md" &
  python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/R-pip.log 2>&1  # entry point: the pytest plugin
  export DIFFTEST_GPU_CAMPAIGN_SECONDS=${CAMPAIGN_SECONDS:-20}
  lane 0,1 xdist python3 -m pytest -n 2 --difftest-gpu-per-worker --difftest-profile gpu --difftest-out /tmp/camp/R1 -m gpu tests/test_gpu_adapters.py -q -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} &
  wait ;;
esac
pack
