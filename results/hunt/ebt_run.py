# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import os, sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, "/tmp/site-ebt_flash_attention")
import triton
import triton.runtime.interpreter as _I

_orig = _I._patch_lang_tensor


def _patch(t, s):
    _orig(t, s)
    s.set_attr(t, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_I._patch_lang_tensor = _patch
import torch
from ebt_flash_attention import ebt_forward_kernel as F, ebt_backward_kernel as Bk
from ebt_flash_attention.ebt_attention import ebt_attention, MASK_CONST

BM = int(os.environ.get("EBT_BM", 32))
BN = int(os.environ.get("EBT_BN", 32))
F._ebt_attn_fwd.configs = [triton.Config({"BLOCK_M": BM, "BLOCK_N": BN})]
for kern in (Bk._ebt_attn_bwd_dkdv, Bk._ebt_attn_bwd_dq):
    kern.configs = [triton.Config({"BLOCK_M": BM, "BLOCK_N": BN})]
Bk._ebt_attn_bwd_dkdv_superdiag.configs = [triton.Config({"BLOCK_M": BM})]


def ref(qo, ko, vo, qp, kp, vp, scale, causal, mask=None):
    """float64 EBT attention. mask: (S+1, S+1) bool or additive, or None."""
    S = qo.shape[2]
    so = qo @ ko.transpose(-1, -2) * scale
    allow_o = torch.ones(S, S, dtype=torch.bool)
    if causal:
        allow_o = allow_o.tril()
    add_o = torch.zeros(S, S, dtype=torch.double)
    add_p = torch.zeros(S, S + 1, dtype=torch.double)
    allow_p = torch.ones(S, S + 1, dtype=torch.bool)
    if mask is not None:
        if mask.dtype == torch.bool:
            allow_o = allow_o & mask[:-1, :-1]
            allow_p = mask[1:, :].clone()
        else:
            add_o = mask[:-1, :-1].double()
            add_p = mask[1:, :].double()
    so = (so + add_o).masked_fill(~allow_o, float("-inf"))
    oo = so.softmax(-1) @ vo
    # predicted stream: row i -> keys k_o[j] (j != i+1, causal j <= i) and k_p[i] at column i+1
    sp_o = qp @ ko.transpose(-1, -2) * scale  # [.., S, S]
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None]
    allow_cross = allow_p[:, :S] & (j != i + 1)
    if causal:
        allow_cross = allow_cross & (j <= i)
    sp_o = (sp_o + add_p[:, :S]).masked_fill(~allow_cross, float("-inf"))
    diag_allow = allow_p[torch.arange(S), torch.arange(S) + 1]
    sp_d = (qp * kp).sum(-1, keepdim=True) * scale + add_p[torch.arange(S), torch.arange(S) + 1][:, None]
    sp_d = sp_d.masked_fill(~diag_allow[:, None], float("-inf"))
    pr = torch.cat([sp_o, sp_d], -1).softmax(-1)
    op = pr[..., :S] @ vo + pr[..., S:] * vp
    return oo, op


def run(B, H, S, D, causal, dtype=torch.float32, mask=None, seed=0, scale_in=1.0, verify=True):
    torch.manual_seed(seed)
    ts = [(torch.randn(B, H, S, D) * (scale_in if n in (0, 3) else 1)).to(dtype).requires_grad_() for n in range(6)]
    dos = [torch.randn(B, H, S, D).to(dtype) for _ in range(2)]
    scale = D**-0.5
    res = {}
    try:
        oo, op = ebt_attention(*ts, sm_scale=scale, attn_mask=mask, causal=causal)
    except Exception as e:
        return {"fwd_err": repr(e)[:250]}
    t64 = [t.detach().double().requires_grad_() for t in ts]
    m64 = None if mask is None else (mask if mask.dtype == torch.bool else mask.double())
    oo64, op64 = ref(*t64, scale, causal, m64)
    res["o_o"] = (oo.double() - oo64).abs().max().item()
    res["o_p"] = (op.double() - op64).abs().max().item()
    g64 = torch.autograd.grad((oo64, op64), t64, [d.double() for d in dos])
    try:
        g = torch.autograd.grad((oo, op), ts, dos)
        for n, a, b in zip(["dq_o", "dk_o", "dv_o", "dq_p", "dk_p", "dv_p"], g, g64):
            res[n] = (a.double() - b).abs().max().item()
    except Exception as e:
        res["bwd_err"] = repr(e)[:250]
    return {k: (f"{v:.1e}" if isinstance(v, float) else v) for k, v in res.items()}
