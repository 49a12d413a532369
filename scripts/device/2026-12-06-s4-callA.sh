#!/usr/bin/env bash
# Device call A (2026-12-06, session 4): cuDNN 9.19 one unattended nightly after the racing-signature
# fix (685ef13); the GPU variant catalogue toward >= 2,000 cases per variant (eight lanes). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/site-cudnn
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
python3 -m zipfile -e .whl/cudnn/nvidia_cudnn_frontend-*.whl /tmp/site-cudnn
export PYTHONPATH=/tmp/site:/tmp/site-cudnn PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('nvidia-cudnn-frontend','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
BUDGET=${BUDGET:-420}
bg() { local name=$1; shift; ( timeout 545 "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
bg cudnn python3 -m difftest run -k cudnn -p nightly --device cuda --time-budget $BUDGET --db none --out /tmp/o/cudnn -q
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --out-dir /tmp/o/variants"
bg var1 $V --per-variant-budget 440 --only sequential-fp32-gemm --out /tmp/o/var1.md
bg var2 $V --per-variant-budget 440 --only fast-f32-3xtf32 --out /tmp/o/var2.md
bg var3 $V --per-variant-budget 220 --only sequential-fp32-gemm-one-tile sparse-tiles-reversed --out /tmp/o/var3.md
bg var4 $V --per-variant-budget 150 --only delta-from-stored-o lse-log2-stored fa2-convention --out /tmp/o/var4.md
bg var5 $V --per-variant-budget 150 --only rounded-mma-operands scaled-ds-stored exp2-folded-scale --out /tmp/o/var5.md
bg var6 $V --per-variant-budget 150 --only lse-only-backward per-head-partials-stored tiles-64x128 --out /tmp/o/var6.md
bg var7 $V --per-variant-budget 110 --only tiles-16x8 whole-row-device-gemm whole-row-splitk-gemm sdpa-math-composite --out /tmp/o/var7.md
bg var8 $V --per-variant-budget 220 --only fp8-current-scaling fp8-tensor-core-accumulator --out /tmp/o/var8.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
echo "== cudnn"; grep -E "^cudnn: |finding|configuration pairs|unexplained|needs|cases" /tmp/o/cudnn.log | cut -c1-400 | head -40
for v in 1 2 3 4 5 6 7 8; do echo "== var$v"; cat /tmp/o/var$v.md 2>/dev/null | cut -c1-200 | head -9; tail -2 /tmp/o/var$v.log | cut -c1-300; done
cd /tmp/o && cp cudnn/report.json $OUT/report-cudnn.json 2>/dev/null
mkdir -p $OUT/variants && cp var*.md $OUT/variants/ 2>/dev/null
tar -cJf $OUT/callA-logs.tar.xz *.log *.md exits.txt 2>/dev/null; ls -la $OUT
