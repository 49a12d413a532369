#!/usr/bin/env bash
# H200 call H (2026-12-02, session 3): (1) is cuDNN's FP8 LSE deviation Hopper's FP8 accumulator
# (fp8_accum_triage.py: the H200's FP8 GEMM fitted by oracles/tensor_core.py; cuDNN's LSE against it;
# causal through use_causal_mask); (2) sdpa-efficient unseeded gpu campaign after the scaled-dS fix
# (issue 27: >= 800 cases, 0 artefacts); (3) fla-core 0.6.0 parallel_attn on CUDA (issue 32: >= 200
# cases, its dSink tail-row finding's standalone script); (4) three correct variants short of 5,000
# nightly cases on the host's cores, the GPU hidden.
set -u
T0=$(date +%s)
D=.device/callH
mkdir -p /tmp/site /tmp/fla_site /tmp/o/variants
python3 -m zipfile -e $D/nvidia_cudnn_frontend-*.whl /tmp/site
for w in $D/fla/*.whl; do python3 -m zipfile -e $w /tmp/fla_site; done
export PYTHONPATH=/tmp/site:$PWD:$PWD/$D/meta PYTHONUNBUFFERED=1
{ echo "date: $(date -u +%FT%TZ) commit: $(cat $D/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "
import sys, torch; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())
for m in ('triton', 'hypothesis', 'nvidia-cudnn-frontend'):
    try: print(m, version(m))
    except Exception: print(m, 'missing')"; } > $OUT/env.txt 2>&1
VB=${VB:-470}
for v in sequential-fp32-gemm sequential-fp32-gemm-one-tile fp8-current-scaling; do
  for i in 1 2 3 4; do
    ( CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 timeout $((VB+60)) python3 -m difftest variants \
        --only $v --cases 30000 --per-variant-budget $VB --shrink-budget 20 --out-dir /tmp/o/variants/$i \
        > /tmp/o/variants/$v-$i.log 2>&1; echo "variant $v/$i exit $?" >> /tmp/o/exits.txt ) &
  done
done
( timeout 240 python3 results/h200/fp8_accum_triage.py > /tmp/o/fp8_accum_triage.log 2>&1
  echo "fp8 triage exit $?" >> /tmp/o/exits.txt ) &
( timeout 420 python3 -m difftest run -k sdpa-efficient -p gpu --device cuda --max-examples 5000 --time-budget 360 \
    --shrink-budget 20 --out /tmp/o/sdpa-efficient --db none -q > /tmp/o/sdpa-efficient.log 2>&1
  echo "sdpa-efficient exit $?" >> /tmp/o/exits.txt ) &
( export PYTHONPATH=/tmp/fla_site:$PYTHONPATH FLA_TILELANG=0
  python3 -c "import fla, triton; print('fla', fla.__version__, 'triton', triton.__version__)" >> $OUT/env.txt 2>&1
  timeout 120 python3 results/bugs/fla/repro_fla_dsink_tail_rows.py > /tmp/o/fla-repro.log 2>&1
  echo "fla repro exit $?" >> /tmp/o/exits.txt
  for n in all notail; do
    extra=""; [ $n = notail ] && extra="--narrow pad_tail=false"
    ( timeout 420 python3 -m difftest run -k fla-attn -p gpu --device cuda --max-examples 3000 --time-budget 330 \
        --shrink-budget 20 $extra --out /tmp/o/fla-$n --db none -q > /tmp/o/fla-$n.log 2>&1
      echo "fla-$n exit $?" >> /tmp/o/exits.txt ) &
  done; wait ) &
wait
echo "elapsed $(( $(date +%s) - T0 )) s"
cat /tmp/o/exits.txt $OUT/env.txt
cat /tmp/o/fp8_accum_triage.log | grep -v Warning | cut -c1-330
tail -25 /tmp/o/fla-repro.log | cut -c1-250
for k in sdpa-efficient fla-all fla-notail; do echo "== $k"; tail -22 /tmp/o/$k.log | cut -c1-260; done
python3 -m difftest variants --from-logs /tmp/o/variants/*/*.jsonl | cut -c1-160
cd /tmp/o && for k in sdpa-efficient fla-all fla-notail; do xz -T0 -c $k/report.json > $k.report.json.xz 2>/dev/null; done
tar -cJf $OUT/variants.tar.xz variants; tar -cJf $OUT/callH.tar.xz --exclude=variants --exclude='*/runs/*/cases*' \
  *.log *.txt *.xz */runs/*/findings.json */runs/*/repro 2>/dev/null; ls -la $OUT
