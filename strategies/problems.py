"""PLACEHOLDER strategy (to be replaced by the strategies work, keeping the signature)."""

from hypothesis import strategies as st

from difftest.capability import Capability
from difftest.problem import Problem


@st.composite
def problems(draw, capability: Capability, profile: str = "ci"):
    c = capability
    hkv = draw(st.integers(1, 2))
    g = draw(st.integers(1, 2)) if c.gqa else 1
    d = draw(st.sampled_from(c.head_dims_qk))
    sq = draw(st.integers(1, min(c.max_seqlen, 80)))
    sk = draw(st.integers(1, min(c.max_seqlen, 80))) if c.seqlen_q_ne_k else sq
    return Problem(batch=draw(st.integers(1, 2)), seqlen_q=sq, seqlen_k=sk, heads_q=hkv * g, heads_kv=hkv,
                   head_dim_qk=d, head_dim_v=d if c.equal_head_dims else draw(st.sampled_from(c.v_dims)),
                   dtype=draw(st.sampled_from(c.dtypes)), causal=c.causal and draw(st.booleans()),
                   seed=draw(st.integers(0, 2**32))).validate()
