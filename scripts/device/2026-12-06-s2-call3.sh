#!/usr/bin/env bash
# Device call 3 of session 2 (2026-12-06): the case bench after the head-dim representatives (#42);
# the new attention space's adapters (#43); the report drafts' scripts (#44); the input-dtype
# running-sum variant on CUDA (#40). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 8 9 25 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .whl/fa4b40/commit)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
timeout 120 python3 -m difftest bench --cases -k sdpa-math -k sdpa-efficient --examples 400 --case-budget 30 --mode alone \
    --json $OUT/cases.json --markdown $OUT/cases.md > /tmp/o/bench.log 2>&1
echo "bench exit $? at $(( $(date +%s) - T0 )) s"; grep -E "alone" /tmp/o/bench.log | cut -c1-220
BUDGET=${BUDGET:-300}
camp() {  # camp NAME KERNEL PROFILE [PYTHONPATH-prefix]
  ( PYTHONPATH=${4:-}/tmp/site:$DSL:$PWD timeout $((BUDGET+60)) python3 -m difftest run -k $2 -p $3 --device cuda \
      --time-budget $BUDGET --db none --out /tmp/o/$1 -q > /tmp/o/$1.log 2>&1
    echo "$1 exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
}
for k in ${KERNELS:-flex flex-sparse}; do camp $k $k gpu; done
[ -n "${FA4_KERNEL:-}" ] && camp fa4-b40 $FA4_KERNEL gpu /tmp/fa4b40:
( cd /tmp/o && python3 $OLDPWD/results/bugs/sdpa-flash/repro_misaligned_address.py > sdpa-flash-misaligned.log 2>&1
  echo "sdpa-flash-misaligned exit $?" >> exits.txt
  PYTHONPATH=/tmp/fa4b40:/tmp/site:$DSL timeout 200 python3 $OLDPWD/results/bugs/fa4/repro_insufficient_registers.py > fa4-regs-b40.log 2>&1
  echo "fa4-regs-b40 exit $?" >> exits.txt
  for v in 25 40; do PYTHONPATH=/tmp/fa4b$v:/tmp/site:$DSL timeout 120 python3 $OLDPWD/results/bugs/fa4/repro_misaligned_inputs.py > fa4-misaligned-b$v.log 2>&1
    echo "fa4-misaligned-b$v exit $?" >> exits.txt; done
  cd $OLDPWD
  PYTHONPATH=/tmp/site:$DSL:$PWD timeout 200 python3 -m difftest bisect results/softcap/fa4-softcap.json --timeout 150 \
      --versions .whl/fa4b8/*.whl .whl/fa4b9/*.whl --work /tmp/o/bisect1 --json /tmp/o/bisect-softcap.json > /tmp/o/bisect-softcap.log 2>&1
  echo "bisect-softcap exit $?" >> /tmp/o/exits.txt
  PYTHONPATH=/tmp/site:$DSL:$PWD timeout 200 python3 -m difftest bisect results/softcap/fa4-crossed-window.json --timeout 150 \
      --versions .whl/fa4b29/*.whl .whl/fa4b30/*.whl --work /tmp/o/bisect2 --json /tmp/o/bisect-window.json > /tmp/o/bisect-window.log 2>&1
  echo "bisect-window exit $?" >> /tmp/o/exits.txt ) &
( OMP_NUM_THREADS=2 timeout $((BUDGET+40)) python3 -m difftest variants --device cuda -p gpu --only input-dtype-running-sum softcap-folded-scale sparse-tiles-reversed \
    --cases 100000 --per-variant-budget $((BUDGET/3)) --shrink-budget 10 --out-dir /tmp/o/variant > /tmp/o/variant.log 2>&1
  echo "variant exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for f in /tmp/o/*.log; do n=$(basename $f .log); case $n in pip|bench) continue;; esac; echo "== $n"
  grep -E "^[a-z0-9-]+: |finding|configuration pairs|unexplained|exit|FAIL|bug|error|Error" $f | cut -c1-260 | head -16; done
tail -5 /tmp/o/variant.log
cat /tmp/o/bisect-*.log | tail -30 | cut -c1-250
cd /tmp/o && find . -name "*.cases.jsonl" -size +20M -delete; tar -cJf $OUT/call6-logs.tar.xz *.log *.json exits.txt */report.json variant 2>/dev/null; ls -la $OUT
