"""float32 GEMMs in GPU summation orders (kernels/gemm_orders.py): each is a GEMM, within the
error any order of its K products may make, and each adds in its own order, bit for bit."""

import torch

from difftest.kernels.gemm_orders import F32, fast_f32_gemm, sequential_gemm, splitk_bounds, splitk_gemm, tf32_split

U32 = 2.0**-24


def _gamma_bound(a, b, k, extra=0.0):
    """|error| of any order of k float32 products: gamma_k of their absolute sum (+ extra)."""
    return (k * U32 / (1 - k * U32) + extra) * (a.double().abs() @ b.double().abs())


def _mixed(seed, m, k, n):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g, dtype=F32) * torch.logspace(-3, 3, k, dtype=F32)
    return a, torch.randn(k, n, generator=g, dtype=F32)


def test_sequential_gemm_is_a_gemm_in_another_order():
    a, b = torch.randn(2, 5, 40, dtype=F32), torch.randn(2, 40, 3, dtype=F32)
    got = sequential_gemm(a, b)
    assert got.shape == (2, 5, 3)
    exact = a.double() @ b.double()
    u32 = 2.0**-24  # any order of 40 float32 terms errs by at most 40u/(1-40u) of their absolute sum
    bound = (40 * u32 / (1 - 40 * u32)) * (a.double().abs() @ b.double().abs())
    assert ((got.double() - exact).abs() <= bound).all()


def test_sequential_gemm_adds_its_products_in_order_one_rounding_at_a_time():
    # The order itself, bit for bit, against a scalar float32 loop; the same products summed in
    # another order (reversed) differ in the last bits of these mixed-magnitude terms.
    g = torch.Generator().manual_seed(3)
    a = torch.randn(3, 24, generator=g, dtype=F32) * torch.logspace(-3, 3, 24, dtype=F32)
    b = torch.randn(24, 2, generator=g, dtype=F32)
    want = torch.zeros(3, 2, dtype=F32)
    for i in range(3):
        for j in range(2):
            acc = torch.zeros((), dtype=F32)
            for k in range(24):
                acc = acc + a[i, k] * b[k, j]
            want[i, j] = acc
    assert torch.equal(sequential_gemm(a, b), want)
    assert not torch.equal(sequential_gemm(a.flip(-1), b.flip(0)), want)


def test_splitk_slices_tile_k_and_add_their_partials_in_order():
    assert splitk_bounds(10, 4) == [(0, 2), (2, 5), (5, 8), (8, 10)]
    assert splitk_bounds(3, 4) == [(0, 1), (1, 2), (2, 3)] and splitk_bounds(1, 4) == [(0, 1)]
    a, b = _mixed(5, 4, 40, 3)
    got = splitk_gemm(a, b, slices=4)
    want = torch.zeros(4, 3, dtype=F32)
    for k0, k1 in splitk_bounds(40, 4):
        want = want + a[:, k0:k1] @ b[k0:k1]
    assert torch.equal(got, want)
    assert ((got.double() - a.double() @ b.double()).abs() <= _gamma_bound(a, b, 40)).all()


def test_tf32_split_rounds_big_toward_zero_and_small_half_up():
    # 1 + 2^-11 + 2^-23: big truncates to 1, the rest 2^-11 (1 + 2^-12) rounds down to 2^-11
    big, small = tf32_split(torch.tensor([1 + 2.0**-11 + 2.0**-23, -(1 + 2.0**-11 + 2.0**-22)]))
    assert big.tolist() == [1.0, -1.0]
    # the rest of the second, 2^-11 (1 + 2^-11), is a tie: half an ulp up, away from zero
    assert small.tolist() == [2.0**-11, -(2.0**-11 + 2.0**-21)]
    x = torch.randn(1000, dtype=F32) * 1e3
    big, small = tf32_split(x)
    assert ((big.view(torch.int32) & 0x1FFF) == 0).all() and ((small.view(torch.int32) & 0x1FFF) == 0).all()
    assert (big.abs() <= x.abs()).all()
    assert ((big.double() + small.double() - x.double()).abs() <= 2.0**-21 * x.double().abs()).all()


def test_fast_f32_is_nearly_float32_and_uses_the_small_parts():
    """3xTF32 errs by about a float32 GEMM's error (the small parts carry the bits TF32 drops);
    one TF32 GEMM of the big parts alone errs ~2^-11 per product."""
    a, b = _mixed(7, 6, 64, 5)
    exact = a.double() @ b.double()
    got = fast_f32_gemm(a, b)
    # per product: small*small dropped (< 2^-20) and the small parts rounded (< 2^-21 each)
    assert ((got.double() - exact).abs() <= _gamma_bound(a, b, 3 * 64 + 2, extra=2.0**-19)).all()
    big_only = tf32_split(a)[0] @ tf32_split(b)[0]
    assert (got.double() - exact).abs().max() < 0.01 * (big_only.double() - exact).abs().max()
    assert not torch.equal(got, a @ b)
