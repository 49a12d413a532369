#!/usr/bin/env bash
# Device call M (2026-12-07, the small call left after refused starts): the four draft reports' scripts (fla
# NSA x2, jvp-flash-attention x2; issue 44), and short unseeded `gpu` campaigns of the adapters never run on
# a GPU or changed since (flex-dynamic with ALiBi, fla-nsa; issue 43), fla-attn, and the prescaled-q variant
# (issue 40). No bundle: torch's own Triton. Carry: .whl/covertable-3.2.0-py3-none-any.whl, .whl/retest,
# .whl/jvp, .gpu. Writes $OUT.
set -u
T0=$(date +%s)
mkdir -p /tmp/site /tmp/o /tmp/site-fla /tmp/site-jvp
python3 -m zipfile -e .whl/covertable-3.2.0-py3-none-any.whl /tmp/site
for w in .whl/retest/fla_core-*.whl .whl/retest/einops-*.whl; do python3 -m zipfile -e $w /tmp/site; python3 -m zipfile -e $w /tmp/site-fla; done
python3 -m zipfile -e .whl/jvp/jvp_flash_attention-0.14.0-py3-none-any.whl /tmp/site-jvp
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/o/pip.log 2>&1 || tail -5 /tmp/o/pip.log
{ echo "date: $(date -u +%FT%TZ) tree: $(cat .gpu/commit)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  python3 -c "
import sys, torch, triton; from importlib.metadata import version
print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)
for m in ('fla-core','hypothesis','covertable'): print(m, version(m))"
  echo "setup $(( $(date +%s) - T0 )) s"; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
for s in fla/repro_fla_nsa_empty_seq fla/repro_fla_nsa_csr_oob jvp-flash/repro_head_dim_16 jvp-flash/repro_mask_large_logits; do
  site=/tmp/site-fla; [ "${s%%/*}" = jvp-flash ] && site=/tmp/site-jvp; n=${s##*/}
  ( cd results/bugs/${s%/*} && PYTHONPATH=$site timeout 150 python3 $n.py > /tmp/o/$n.out 2>&1; echo "$n exit $?" >> /tmp/o/drafts.txt ) &
done
B=${BUDGET:-170}
bg() { local name=$1; shift; ( timeout $((B+40)) "$@" > /tmp/o/$name.log 2>&1; echo "$name exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/o/exits.txt ) & }
R="python3 -m difftest run -p gpu --device cuda --time-budget $B --db none -q"
bg flexdyn-0 $R -k flex-dynamic --shard 0/2 --out /tmp/o/flexdyn-0
bg flexdyn-1 $R -k flex-dynamic --shard 1/2 --out /tmp/o/flexdyn-1
bg nsa $R -k fla-nsa --out /tmp/o/nsa
bg fla $R -k fla-attn --out /tmp/o/fla
bg var1 python3 -m difftest variants --device cuda -p gpu --cases 2100 --per-variant-budget $B --out-dir /tmp/o/variants --only prescaled-q --out /tmp/o/var1.md
wait
echo "elapsed $(( $(date +%s) - T0 )) s"; sort -t' ' -k5 -n /tmp/o/exits.txt; cat /tmp/o/drafts.txt
for n in repro_fla_nsa_empty_seq repro_fla_nsa_csr_oob repro_head_dim_16 repro_mask_large_logits; do echo "== $n"; tail -16 /tmp/o/$n.out | cut -c1-250; done
for k in flexdyn-0 flexdyn-1 nsa fla; do echo "== $k"; grep -E "^[a-z0-9-]+: (passed|failed)|^  finding|needs|configuration pairs|compile reuse|unexplained|unavailable|refus|^  (kernel|compile|truth|inputs) " /tmp/o/$k.log | cut -c1-300 | head -16; done
echo "== var1"; grep -v "^$" /tmp/o/var1.md 2>/dev/null | cut -c1-600 | head -4; tail -1 /tmp/o/var1.log | cut -c1-300
cd /tmp/o && mkdir -p rep && for k in flexdyn-0 flexdyn-1 nsa fla; do cp $k/report.json rep/$k.json 2>/dev/null; done
tar -cJf $OUT/callM-reports.tar.xz rep; tar -cJf $OUT/callM-logs.tar.xz *.log *.md *.out *.txt variants 2>/dev/null; ls -la $OUT
