#!/usr/bin/env bash
# One H200 call: issue 27.4's unseeded gpu campaigns side by side, the cuDNN standalone
# repro, the structured-values CPU/GPU byte test and a TileLang race-stress sample.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o
for b in .device/call1/*.tar.xz; do tar -C /tmp/site -xJf $b; done
python3 -m zipfile -e .device/call1/nvidia_cudnn_frontend-*.whl /tmp/site
export PYTHONPATH=/tmp/site:$PWD:$PWD/.device/call1/meta XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(git rev-parse HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('triton','jax','dew-flash-attn-cu13','tilelang','nvidia-cudnn-frontend','hypothesis'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
BUDGET=${BUDGET:-380}
for k in sdpa-efficient sdpa-math fa3 tilelang-det; do
  ( timeout $((BUDGET+90)) python3 -m difftest run -k $k -p gpu --device cuda --max-examples 2000 \
      --time-budget $BUDGET --shrink-budget 20 --out /tmp/o/$k --db none -q > /tmp/o/$k.log 2>&1
    echo "$k exit $?" >> /tmp/o/exits.txt ) &
done
[ -n "${SKIP_EXTRAS:-}" ] || ( timeout 120 python3 results/bugs/cudnn/repro_cudnn_sdpa.py > /tmp/o/cudnn_repro.jsonl 2> /tmp/o/cudnn_repro.err
  echo "cudnn repro exit $?" >> /tmp/o/exits.txt ) &
[ -n "${SKIP_EXTRAS:-}" ] || ( timeout 200 python3 -m pytest -q -m gpu tests/test_values_structured.py -p no:cacheprovider > /tmp/o/structured_gpu.log 2>&1
  echo "structured gpu test exit $?" >> /tmp/o/exits.txt ) &
[ -n "${SKIP_EXTRAS:-}" ] || ( timeout 300 python3 - > /tmp/o/stress.log 2>&1 <<'PY'
from difftest.execute import adapter as registry
from difftest.judge.stress import stress_case, stress_problems
for name in ("tilelang",):
    k = registry.get(name)
    for p in stress_problems(k.capability, batch=60, heads=8, seqlen=257)[:2]:
        r = stress_case(k, p, reps=100, load=1)
        print(r.line(), flush=True)
PY
  echo "stress exit $?" >> /tmp/o/exits.txt ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt
for k in sdpa-efficient sdpa-math fa3 tilelang-det; do echo "== $k"; tail -25 /tmp/o/$k.log; done
tail -5 /tmp/o/structured_gpu.log; cat /tmp/o/stress.log | tail -5; head -c 3000 /tmp/o/cudnn_repro.jsonl; tail -3 /tmp/o/cudnn_repro.err
cd /tmp/o && find . -name "*.cases.jsonl" -size +20M -delete; tar -cJf $OUT/call1.tar.xz . 2>/dev/null; ls -la $OUT
