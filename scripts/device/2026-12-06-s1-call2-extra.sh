#!/usr/bin/env bash
# The correct-variant catalogue on CUDA (#40), beside call 2's campaigns: each variant at once.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
V=/tmp/o/extra; mkdir -p $V; T0=$(date +%s)
for n in $(python3 -m difftest variants --device cuda --list | awk '{print $1}'); do
  timeout -k 10 ${VBUDGET:-380} python3 -m difftest variants --device cuda -p gpu --only $n --cases 100000 \
      --per-variant-budget $(( ${VBUDGET:-380} - 50 )) --shrink-budget 20 --out-dir $V/$n > $V/$n.log 2>&1 &
done
wait; echo "variants elapsed $(( $(date +%s) - T0 )) s"
python3 -m difftest variants --from-logs $V/*/*.jsonl --out $V/table.md > /dev/null; echo "table exit $?"
cut -d'|' -f2-5,7 $V/table.md | cut -c1-300; tail -qn 1 $V/*.log | cut -c1-200
find $V -name "*.jsonl" -size +20M -delete
