#!/usr/bin/env bash
# Device call 5 (2026-12-06, session 2): FA4 time travel, one unattended nightly per beta, after the
# per-finding signature share (#39). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
BUDGET=${BUDGET:-420}
for v in 25 29 30 36 40; do
  P=/tmp/site:$DSL:$PWD; [ $v != 36 ] && P=/tmp/fa4b$v:$P
  ( PYTHONPATH=$P timeout $((BUDGET+60)) python3 -m difftest run -k fa4 -p nightly --device cuda \
      --time-budget $BUDGET --db none --out /tmp/o/b$v -q 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > /tmp/o/b$v.log
    echo "b$v exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
done
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for v in 25 29 30 36 40; do echo "== b$v"; grep -E "^fa4: |finding|configuration pairs|unexplained|compile reuse|needs" /tmp/o/b$v.log | cut -c1-300 | head -40; done
cd /tmp/o && for v in 25 29 30 36 40; do cp b$v/report.json $OUT/report-b$v.json 2>/dev/null; done
tar -cJf $OUT/call5-logs.tar.xz *.log exits.txt; ls -la $OUT
