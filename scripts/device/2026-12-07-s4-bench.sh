#!/usr/bin/env bash
# Device call (2026-12-07, session 4): issue 42's case bench, the alone half that session 3 did not run: each of
# sdpa-efficient, sdpa-math, tilelang-det and fa3 alone on the GPU, before (30f8f82, .device/before.tar.xz) and
# after (this tree), the same seed-0 Problems. Carry: .device/tilelang.tar.xz, .device/fa3.tar.xz,
# .device/before.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .gpu. Writes $OUT (bench.md, bench.json, bench.log).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/before
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
tar -C /tmp/before -xJf .device/before.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit) before: 30f8f82 $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) setup $(( $(date +%s) - T0 )) s"
timeout ${BENCH_S:-500} python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math -k tilelang-det -k fa3 \
  --examples 400 --case-budget ${CASE_BUDGET:-20} --mode alone --before /tmp/before --device cuda \
  --markdown $OUT/bench.md --json $OUT/bench.json > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"
cp /tmp/o/bench.log $OUT/; tail -40 /tmp/o/bench.log | cut -c1-300
