#!/usr/bin/env bash
# The draft reports' scripts of issue 44 (2026-12-07), each with only its own package unzipped on PYTHONPATH
# (torch and triton are the machine's), one after the other; compute-sanitizer on the two out-of-bounds drafts.
# Called from a device call with .whl/retest, .whl/jvp and .whl/hunt carried, as two chains side by side
# (`drafts.sh OUT prep`, then `drafts.sh OUT 1` and `drafts.sh OUT 2`). Writes OUT/drafts.txt and OUT/<script>.out.
set -u
O=$1; C=$2; mkdir -p $O
site() { local d=/tmp/site-$1; shift; [ -d $d ] && { echo $d; return; }; mkdir -p $d; for w in "$@"; do python3 -m zipfile -e $w $d; done; echo $d; }
FLA=$(site fla .whl/retest/fla_core-*.whl .whl/retest/einops-*.whl)
JVP=$(site jvp .whl/jvp/jvp_flash_attention-0.14.0-py3-none-any.whl)
FAT=$(site fat .whl/hunt/flash_attn_triton-0.1.1-py3-none-any.whl .whl/retest/einops-*.whl)
ADA=$(site ada .whl/hunt/adasplash-0.2.2-py3-none-any.whl)
FSA=$(site fsa .whl/hunt/flash_sparse_attn-2.0.6-py3-none-any.whl)
CHILL=$(site chill .whl/hunt/chill_attention-2.1.0-py3-none-any.whl)
EBT=$(site ebt .whl/hunt/ebt_flash_attention-0.2.0-py3-none-any.whl)
[ $C = prep ] && exit 0  # the folders made once, before the chains
one() {  # one(site, folder, script, [sanitizer])
  local s=$1 dir=$2 n=$3 pre=""; [ "${4:-}" = san ] && pre="compute-sanitizer --tool memcheck --print-limit 5"
  local t0=$(date +%s)
  ( cd results/bugs/$dir && PYTHONPATH=$s timeout ${DRAFT_S:-150} $pre python3 $n.py > $O/$n${4:+.$4}.out 2>&1 ); local rc=$?
  echo "$dir/$n${4:+ ($4)} exit $rc in $(( $(date +%s) - t0 )) s" >> $O/drafts.txt
}
if [ $C = 1 ]; then
one $CHILL chill-attention repro_wheel_no_code
for n in repro_noncausal_padded_keys repro_seqlen_k_ne_q repro_import_triton34; do one $FAT flash-attn-triton $n; done
for n in repro_bwd_preprocess_oob repro_gqa_v1_path; do one $ADA adasplash $n; done
for n in repro_noncausal_tail_keys repro_additive_mask_ln2 repro_head_dim_16; do one $EBT ebt-flash $n; done
one $ADA adasplash repro_bwd_preprocess_oob san
else
for n in repro_seqused_k_backward repro_kernel_cache_seqlen1 repro_lse_descriptor_align; do one $FSA flash-sparse-attn $n; done
for n in repro_head_dim_16 repro_mask_large_logits; do one $JVP jvp-flash $n; done
for n in repro_fla_nsa_empty_seq repro_fla_nsa_csr_oob; do one $FLA fla $n; done
one $FLA fla repro_fla_nsa_csr_oob san
fi
