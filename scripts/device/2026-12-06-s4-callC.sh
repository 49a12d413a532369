#!/usr/bin/env bash
# Device call C (2026-12-06, session 4): cuDNN 9.19 one unattended nightly after the racing-signature
# rule of caea68a; sdpa-flash and sdpa-math unseeded gpu campaigns; the GPU variants still short of
# 2,000 cases in call A (five lanes). Writes $OUT.
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
bg sflash python3 -m difftest run -k sdpa-flash -p gpu --device cuda --time-budget $BUDGET --db none --out /tmp/o/sflash -q
bg smath python3 -m difftest run -k sdpa-math -p gpu --device cuda --time-budget $BUDGET --db none --out /tmp/o/smath -q
V="python3 -m difftest variants --device cuda -p gpu --cases 2100 --out-dir /tmp/o/variants"
bg var1 $V --per-variant-budget 215 --only tiles-16x8 whole-row-device-gemm --out /tmp/o/var1.md
bg var2 $V --per-variant-budget 215 --only whole-row-splitk-gemm sdpa-math-composite --out /tmp/o/var2.md
bg var3 $V --per-variant-budget 430 --only fp8-tensor-core-accumulator --out /tmp/o/var3.md
bg var4 $V --per-variant-budget 143 --only delta-from-stored-o lse-log2-stored rounded-mma-operands --out /tmp/o/var4.md
bg var5 $V --per-variant-budget 143 --only lse-only-backward scaled-ds-stored per-head-partials-stored --out /tmp/o/var5.md
bg var6 $V --per-variant-budget 215 --only sequential-fp32-gemm-one-tile fp8-current-scaling --out /tmp/o/var6.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
for k in cudnn sflash smath; do echo "== $k"; grep -E "^[a-z0-9-]+: |finding|configuration pairs|unexplained|time split|framework" /tmp/o/$k.log | cut -c1-400 | head -30; done
for v in 1 2 3 4 5 6; do echo "== var$v"; cat /tmp/o/var$v.md 2>/dev/null | cut -c1-120 | head -9; tail -1 /tmp/o/var$v.log | cut -c1-200; done
cd /tmp/o && cp cudnn/report.json $OUT/report-cudnn.json 2>/dev/null
tar -cJf $OUT/callC-logs.tar.xz *.log *.md exits.txt 2>/dev/null; ls -la $OUT
