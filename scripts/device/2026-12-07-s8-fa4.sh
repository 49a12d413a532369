#!/usr/bin/env bash
# Device call (2026-12-07, session 8): issue 39's FA4 time travel on the three old betas the issue names, after
# the masked-variation and CUDA-name signature rules (ecd1fdd, e4c6be3, 417ec7b: CPU-tested only). One
# unattended `nightly` per beta, nothing narrowed, sharded over the 16 cores: BETAS="25:4 29:3 30:3" (beta:shards).
# Carry: .device/fa4.tar.xz, .whl/covertable-3.2.0-py3-none-any.whl, .whl/fa4bNN for each beta but the bundle's
# own (b36), .gpu.
# Writes $OUT (env.txt, summary.txt, fa4-reports.tar.xz).
set -u
T0=$(date +%s)
T=$(mktemp -d)  # never a fixed /tmp path: a warm machine kept the last call's /tmp/o, whose logs joined this one's
mkdir -p $T/site $T/o
tar -C $T/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl $T/site
BETAS=${BETAS:-"25:4 29:3 30:3"}
for bs in $BETAS; do v=${bs%%:*}; mkdir -p $T/fa4b$v  # no .whl/fa4bNN: the bundle's own release (b36)
  [ -d .whl/fa4b$v ] && python3 -m zipfile -e .whl/fa4b$v/*.whl $T/fa4b$v; done
DSL=$T/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=$T/site:$DSL:$PWD PYTHONUNBUFFERED=1 DIFFTEST_THREADS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > $T/o/pip.log 2>&1 || tail -5 $T/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  for bs in $BETAS; do v=${bs%%:*}; PYTHONPATH=$T/fa4b$v:$PYTHONPATH python3 -c "from importlib.metadata import version; print('fa4 b$v', version('flash-attn-4'), 'cutlass-dsl', version('nvidia-cutlass-dsl'))"; done
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
B=${BUDGET:-420}
bg() { local name=$1 v=$2; shift 2
  ( PYTHONPATH=$T/fa4b$v:$T/site:$DSL:$PWD timeout $((B+70)) "$@" 2>&1 | grep -v "generate_mlir_function_types\|UserWarning: Argument aux_data" > $T/o/$name.log
    echo "$name exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> $T/o/exits.txt ) & }
R="python3 -m difftest run -p nightly --device cuda --time-budget $B --db none -q -k fa4"
for bs in $BETAS; do v=${bs%%:*} n=${bs##*:}
  for i in $(seq 0 $((n-1))); do bg b$v-$i $v $R --shard $i/$n --out $T/o/b$v-$i; done; done
wait
echo "campaigns done at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary.txt; sort -t' ' -k5 -n $T/o/exits.txt >> $OUT/summary.txt
for k in $(for bs in $BETAS; do echo b${bs%%:*}; done); do
  python3 -m difftest merge $T/o/$k-*/report.json -o $T/o/$k.json > $T/o/merge-$k.log 2>&1 || tail -3 $T/o/merge-$k.log >> $OUT/summary.txt
  python3 scripts/device/summarise_reports.py $T/o/$k.json $k >> $OUT/summary.txt 2>&1
done
for k in $(for bs in $BETAS; do echo b${bs%%:*}-0; done); do echo "-- $k" >> $OUT/summary.txt; grep -E "memory|not judged|framework overhead|configuration pairs|rate:" $T/o/$k.log | cut -c1-220 | head -8 >> $OUT/summary.txt; done
cd $T/o && mkdir -p rep && cp b*.json rep/ 2>/dev/null
for d in b[0-9]*-[0-9]; do [ -d $d ] && find $d -path '*repro*' -name '*.json' -size -200k -exec cp --parents {} rep/ \; ; done
tar -cJf $OUT/fa4-reports.tar.xz rep *.log *.txt 2>/dev/null; cd - > /dev/null
echo "elapsed $(( $(date +%s) - T0 )) s" >> $OUT/summary.txt; cut -c1-400 $OUT/summary.txt; ls -la $OUT
