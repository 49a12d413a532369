#!/usr/bin/env bash
# Device call B (2026-12-06, session 3): cuDNN 9.19 one unattended nightly (#39); the GPU variant
# catalogue to >= 2,000 cases each (#40); softcap/sparse mutants on CUDA (#43); the case bench with
# sdpa-efficient, sdpa-math and fa3 side by side (#42). Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/site-cudnn
tar -C /tmp/site -xJf .device/fa3.tar.xz
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
python3 -m zipfile -e .whl/cudnn/nvidia_cudnn_frontend-*.whl /tmp/site-cudnn
export PYTHONPATH=/tmp/site:/tmp/site-cudnn PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) commit: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('nvidia-cudnn-frontend','hypothesis','covertable'):
    try: print(m, version(m))
    except Exception as e: print(m, 'missing')"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
BUDGET=${BUDGET:-470}
bg() { local name=$1; shift; ( timeout $((BUDGET+70)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
bg cudnn python3 -m difftest run -k cudnn -p nightly --device cuda --time-budget $BUDGET --db none --out /tmp/o/cudnn -q
V="python3 -m difftest variants --device cuda -p gpu --cases 2500 --per-variant-budget 75 --out-dir /tmp/o/variants"
bg var1 $V --only whole-row-device-gemm whole-row-splitk-gemm sdpa-math-composite dq-atomics-per-element fast-f32-3xtf32 --out /tmp/o/var1.md
bg var2 $V --only sparse-tiles-reversed softcap-folded-scale input-dtype-running-sum sequential-fp32-gemm-one-tile sequential-fp32-gemm --out /tmp/o/var2.md
bg var3 $V --only delta-from-stored-o rounded-mma-operands scaled-ds-stored exp2-folded-scale lse-only-backward --out /tmp/o/var3.md
bg var4 $V --only lse-log2-stored dq-splitk-atomics per-head-partials-stored tiles-64x128 tiles-16x8 --out /tmp/o/var4.md
bg var5 $V --only fa2-convention fp8-current-scaling fp8-tensor-core-accumulator --out /tmp/o/var5.md
bg mut python3 -m difftest mutants --device cuda -p gpu --no-grid --per-mutant-budget 40 --only softcap-ignored-bwd softcap-fa4-b8-formula softcap-derivative-missing softcap-derivative-of-raw-logit softcap-before-scale crossed-window-as-full negative-window-clamped sparse-bwd-ignores-mask sparse-bwd-transposed sparse-empty-row-nan sparse-topk-dup-twice --out /tmp/o/mut.md
sleep 20
bg bench python3 -m difftest bench --cases -k sdpa-efficient -k sdpa-math -k fa3 --examples 400 --case-budget 30 --mode side
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; cat /tmp/o/exits.txt
echo "== cudnn"; grep -E "^cudnn: |finding|configuration pairs|unexplained|needs" /tmp/o/cudnn.log | cut -c1-300 | head -30
for v in 1 2 3 4 5; do echo "== var$v"; cat /tmp/o/var$v.md 2>/dev/null | head -12; tail -3 /tmp/o/var$v.log; done
echo "== mutants"; cat /tmp/o/mut.md 2>/dev/null | head -20; tail -4 /tmp/o/mut.log
echo "== bench"; tail -40 /tmp/o/bench.log
cd /tmp/o && cp cudnn/report.json $OUT/report-cudnn.json 2>/dev/null; gzip -c cudnn/cudnn.cases.jsonl > $OUT/cases-cudnn.jsonl.gz 2>/dev/null
tar -cJf $OUT/callB-logs.tar.xz *.log *.md exits.txt 2>/dev/null; ls -la $OUT
