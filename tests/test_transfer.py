"""A case's outputs cross the worker pipe as one buffer (difftest/execute/transfer.py): every
run's tensors come back with the kernel's dtypes, shapes and bits, NaN payloads included."""

import torch

from difftest.execute import transfer
from difftest.model.outputs import Outputs, is_poison, poison_fill


def _bits(t):
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _runs():
    g = torch.Generator().manual_seed(0)
    o = torch.randn(5, 3, 8, generator=g).to(torch.bfloat16)
    lse = torch.randn(5, 3, generator=g)
    lse[1, 2] = float("-inf")
    dq = poison_fill((5, 3, 8), torch.float16)  # marked NaNs must survive
    dq[0] = 1.5
    dk = torch.randn(8, 4, 7, generator=g).transpose(0, 1)  # not contiguous
    dv = torch.empty(0, 2, 4)  # no rows
    dsink = torch.randn(3, generator=g).to(torch.float8_e4m3fn)
    first = Outputs(o=o, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
    return [first, Outputs(o=o * 2, lse=lse)]


def _same(a: Outputs, b: Outputs):
    assert [n for n, _ in a.items()] == [n for n, _ in b.items()]
    for n, t in a.items():
        u = b.get(n)
        assert u.dtype == t.dtype and u.shape == t.shape, n
        assert torch.equal(_bits(u), _bits(t)), n


def test_small_outputs_travel_inline_and_come_back_bit_for_bit():
    runs = _runs()
    layout, buf = transfer.pack_outputs(runs)
    assert isinstance(buf, bytes) and len(buf) <= transfer.INLINE_BYTES
    back = transfer.unpack_outputs((layout, buf))
    assert len(back) == 2
    for a, b in zip(runs, back):
        _same(a, b)
    assert int(is_poison(back[0].dq[1:]).sum()) == 4 * 3 * 8


def test_large_outputs_travel_as_one_shared_tensor(monkeypatch):
    monkeypatch.setattr(transfer, "INLINE_BYTES", 64)
    runs = _runs()
    layout, buf = transfer.pack_outputs(runs)
    assert isinstance(buf, torch.Tensor) and buf.is_shared()
    for a, b in zip(runs, transfer.unpack_outputs((layout, buf), device="cpu")):
        _same(a, b)


def test_no_output_at_all():
    layout, buf = transfer.pack_outputs([Outputs()])
    assert transfer.unpack_outputs((layout, buf))[0] == Outputs()
