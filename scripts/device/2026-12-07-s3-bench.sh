#!/usr/bin/env bash
# Device call (2026-12-07, session 3): issue 42's case bench, four kernels alone and side by side, before
# (30f8f82, the tree the issue measured, packed in .device/before.tar.xz) and after (this tree), on the same
# Problems (seed 0): sdpa-efficient, sdpa-math, tilelang-det, fa3. Nothing else runs on the GPU meanwhile.
# Carry: .device/tilelang.tar.xz, .device/fa3.tar.xz, .device/before.tar.xz,
# .whl/covertable-3.2.0-py3-none-any.whl, .gpu. Writes $OUT (env.txt, bench.md, bench.json, bench-logs.tar.xz).
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/before
for b in tilelang fa3; do tar -C /tmp/site -xJf .device/$b.tar.xz; done
tar -C /tmp/before -xJf .device/before.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit) before: 30f8f82"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
timeout ${BENCH_S:-500} python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math -k tilelang-det -k fa3 \
  --examples 400 --case-budget ${CASE_BUDGET:-30} --mode both --before /tmp/before --device cuda \
  --markdown $OUT/bench.md --json $OUT/bench.json > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"
tail -60 /tmp/o/bench.log | cut -c1-300
cd /tmp/o && tar -cJf $OUT/bench-logs.tar.xz *.log 2>/dev/null; ls -la $OUT
