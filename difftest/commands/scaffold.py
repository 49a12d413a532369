"""``difftest new-adapter NAME``: a skeleton package for bringing your own kernel.

It writes NAME/ with pyproject.toml (the ``difftest.kernels`` entry point), a package
holding ``kernel.py`` (a plain-torch stand-in to replace with the call into your kernel),
``adapter.py`` (the adapter and its capability: the basics only) and a pytest test. It
passes out of the box, so the first run checks the plumbing before the kernel is swapped
in; docs/adapters.md explains every line.
"""

import keyword
import re
from pathlib import Path

from difftest.errors import InputError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

# setuptools >= 64 builds editable installs (PEP 660); pip's build isolation fetches it (and the
# wheel package older setuptools ask for), so the interpreter's own setuptools never matters.
PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "difftest adapter for the {name} attention kernel"
requires-python = ">=3.11"
dependencies = ["torch", "difftest"]

[tool.setuptools]
packages = ["{pkg}"]

# difftest finds the kernel under this name: `difftest run -k {name}`
[project.entry-points."difftest.kernels"]
{name} = "{pkg}.adapter:{cls}"
"""

KERNEL = '''"""The kernel under test. This stand-in is plain torch (float32 math, autograd for the
backward) so the skeleton passes out of the box; replace the two functions' bodies with
the calls into your kernel, keeping their contract:

forward(q, k, v, causal, scale) -> (o, lse, ctx)
    q [batch, seq_q, heads_q, dim_qk], k/v [batch, seq_k, heads_kv, dim], the inputs'
    dtype; o like q (dim_v) in that dtype, lse [batch, heads_q, seq_q] float32 natural-log
    sum-exp of the scaled logits; ctx: whatever backward needs.
backward(do, ctx) -> (dq, dk, dv), shaped and typed like q, k, v.
"""

import torch


def forward(q, k, v, causal: bool, scale: float):
    qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", qf, kf) * scale
    if causal:  # bottom-right diagonal, FlashAttention's convention
        sq, sk = s.shape[-2], s.shape[-1]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(diagonal=sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vf)
    return o.detach().to(q.dtype), lse.detach(), (qf, kf, vf, o)


def backward(do, ctx):
    qf, kf, vf, o = ctx
    dq, dk, dv = torch.autograd.grad(o, (qf, kf, vf), do.float())
    return dq.to(do.dtype), dk.to(do.dtype), dv.to(do.dtype)
'''

ADAPTER = '''"""difftest adapter for {name}: translates difftest's packed (THD) inputs to the kernel's
calling convention and back. It never compares anything. Guide: docs/adapters.md in
difftest's repository."""

from difftest import Capability, KernelAdapter, Outputs

from . import kernel


class {cls}(KernelAdapter):
    name = "{name}"
    description = "{name} attention kernel"
    # The basics only (dense, MHA, no mask, no sinks, no varlen). Opt in to what your
    # kernel serves, e.g. gqa=True, causal=True, aligns=("bottom_right",), varlen=True.
    capability = Capability(
        dtypes=("float32", "float16", "bfloat16"),
        head_dims_qk=(16, 32, 64),
        max_seqlen=128,
        outputs=("o", "lse", "dq", "dk", "dv"),  # no sinks, so no dsink
    )

    def forward(self, inputs, out=None):
        p = inputs.problem
        q, k, v = inputs.bshd("q"), inputs.bshd("k"), inputs.bshd("v")  # dense: [batch, seq, heads, dim]
        o, lse, ctx = kernel.forward(q, k, v, causal=p.causal, scale=p.scale)
        o = o.reshape(p.total_q, p.heads_q, p.head_dim_v)  # back to packed [tokens, heads, dim]
        lse = lse.transpose(1, 2).reshape(p.total_q, p.heads_q)  # [batch, heads, seq] -> [tokens, heads]
        return Outputs(o=o, lse=lse), ctx

    def backward(self, inputs, fwd, ctx, out=None):
        p = inputs.problem
        dq, dk, dv = kernel.backward(inputs.bshd("do"), ctx)
        return Outputs(o=fwd.o, lse=fwd.lse, dq=dq.reshape(inputs.q.shape), dk=dk.reshape(inputs.k.shape),
                       dv=dv.reshape(inputs.v.shape))
'''

TEST = '''"""difftest campaign against {name} (pytest; the plugin gives the fixture)."""


def test_{pkg}_backward(difftest_campaign):
    difftest_campaign("{name}", profile="quick")
'''

README = """# {name}: difftest adapter

```bash
pip install -e .                          # registers the kernel with difftest (entry point)
difftest list                             # {name} is listed
difftest run -k {name} -p quick           # a short campaign
python -m pytest tests                    # the same through pytest
```

Replace the bodies of `{pkg}/kernel.py` with calls into your kernel and opt in to the
features it serves in `{pkg}/adapter.py` (`Capability`; table in difftest's docs/adapters.md).
"""


def write_skeleton(name: str, where=".") -> Path:
    """Write the skeleton package ``where/name`` and return its folder."""
    if not _NAME.match(name):
        raise InputError(f"new-adapter {name!r}: allowed a name of letters, digits, '-' and '_' starting with a letter")
    pkg = name.replace("-", "_").lower()
    if keyword.iskeyword(pkg):
        raise InputError(f"new-adapter {name!r}: {pkg!r} is a Python keyword; choose another name")
    cls = "".join(part.capitalize() for part in re.split(r"[-_]", name) if part) + "Adapter"
    root = Path(where) / name
    if root.exists():
        raise FileExistsError(f"new-adapter {name!r}: {root} already exists; choose another --dir or name")
    fmt = {"name": name, "pkg": pkg, "cls": cls, "dist": f"{name}-difftest-adapter"}
    files = {
        "pyproject.toml": PYPROJECT,
        f"{pkg}/__init__.py": '"""{name} and its difftest adapter."""\n',
        f"{pkg}/kernel.py": KERNEL,
        f"{pkg}/adapter.py": ADAPTER,
        f"tests/test_{pkg}.py": TEST,
        "README.md": README,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(**fmt) if "{" in text and rel != f"{pkg}/kernel.py" else text)
    return root
