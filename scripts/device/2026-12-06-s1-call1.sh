#!/usr/bin/env bash
# Device call 1 (2026-12-06): FA4 time travel, one unattended nightly campaign per beta (#39),
# and the FA4 reports retested on 4.0.0b40 (#44). Run from the repository root; writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
tar -C /tmp/site -xJf .device/fa4.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for v in 25 29 30 40; do mkdir -p /tmp/fa4b$v && python3 -m zipfile -e .whl/fa4b$v/*.whl /tmp/fa4b$v; done
rm -rf /tmp/fa4-new && cp -a /tmp/fa4b40 /tmp/fa4-new
DSL=/tmp/site/nvidia_cutlass_dsl/dsl_packages
export PYTHONPATH=/tmp/site:$DSL PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse HEAD 2>/dev/null || cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('nvidia-cutlass-dsl','flash-attn-4','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing', e)"
  echo "setup $(( $(date +%s) - T0 )) s"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
BUDGET=${BUDGET:-420}
for v in 25 29 30 36 40; do
  P=/tmp/site:$DSL:$PWD; [ $v != 36 ] && P=/tmp/fa4b$v:$P
  ( PYTHONPATH=$P timeout $((BUDGET+70)) python3 -m difftest run -k fa4 -p nightly --device cuda \
      --time-budget $BUDGET --db none --out /tmp/o/b$v -q 2>&1 | grep -v generate_mlir_function_types > /tmp/o/b$v.log
    echo "b$v exit ${PIPESTATUS[0]} at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
done
( OUT=/tmp/o/retest FA4_NEW=/tmp/fa4-new SITE=/tmp/site DEADLINE_S=420 bash results/bugs/retest_gpu.sh \
    > /tmp/o/retest.log 2>&1; echo "retest exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for v in 25 29 30 36 40; do echo "== b$v"; grep -E "^fa4|finding|configuration pairs|unexplained|cases," /tmp/o/b$v.log | cut -c1-260 | head -24; done
cat /tmp/o/retest/retest.txt 2>/dev/null | cut -c1-300
cd /tmp/o && for v in 25 29 30 36 40; do cp b$v/report.json $OUT/report-b$v.json 2>/dev/null; done
tar -cJf $OUT/call1-logs.tar.xz *.log exits.txt retest 2>/dev/null; ls -la $OUT
