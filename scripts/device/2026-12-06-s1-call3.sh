#!/usr/bin/env bash
# Device call 3 (2026-12-06): framework time per case before (30f8f82) and after, alone and
# side by side (#42), then FA4 time travel again on the hunt's fixes (#39). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/before
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
tar -C /tmp/before -xJf .device/before.tar.xz
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
timeout 170 python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math --examples ${EXAMPLES:-60} --mode both \
    --before /tmp/before --json $OUT/cases.json --markdown $OUT/cases.md > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"; tail -40 /tmp/o/bench.log | cut -c1-200
BUDGET=${BUDGET:-300}
for v in 25 30 40; do
  P=/tmp/fa4b$v:/tmp/site:$DSL:$PWD
  ( PYTHONPATH=$P timeout $((BUDGET+60)) python3 -m difftest run -k fa4 -p nightly --device cuda \
      --time-budget $BUDGET --db none --out /tmp/o/b$v -q 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/b$v.log
    echo "b$v exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
done
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for v in 25 30 40; do echo "== b$v"; grep -E "^fa4: |finding|configuration pairs|unexplained|compile reuse" /tmp/o/b$v.log | cut -c1-260 | head -24; done
cd /tmp/o && tar -cJf $OUT/call3-logs.tar.xz *.log exits.txt b*/report.json 2>/dev/null; ls -la $OUT
