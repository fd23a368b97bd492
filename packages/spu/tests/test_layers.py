"""Spec section 6: the oracles of the three layers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from spu_dna.functional import (
    fft_conv,
    fft_size,
    fit_filter,
    sample_spectrum,
    token_conv_reference,
)
from spu_dna.layers import DomainPlasticity, LocusPlasticity, SaliencyPlasticity, SPUBlock

torch.manual_seed(0)


def _lpl_conv(lpl: LocusPlasticity, x: torch.Tensor) -> torch.Tensor:
    return token_conv_reference(x, lpl.kernels(x))


def test_lpl_with_zero_generator_is_a_static_depthwise_conv():
    d, k, groups = 8, 5, 4
    lpl = LocusPlasticity(d, kernel=k, groups=groups)
    with torch.no_grad():
        lpl.generator.weight.zero_()
        lpl.generator.bias.copy_(torch.randn(groups * k))
    x = torch.randn(2, 13, d, dtype=torch.float64)
    lpl = lpl.double()
    static = lpl.generator.bias.view(groups, k).softmax(-1)
    weight = static.repeat_interleave(d // groups, dim=0).unsqueeze(1)  # (d, 1, k)
    expected = F.conv1d(x.transpose(1, 2), weight, padding=k // 2, groups=d).transpose(1, 2)
    torch.testing.assert_close(_lpl_conv(lpl, x), expected)
    # the layer is that conv followed by its projection
    torch.testing.assert_close(lpl(x), lpl.project(expected))


@pytest.mark.parametrize("k", [3, 4, 7])
def test_lpl_jacobian_vanishes_beyond_half_the_kernel(k):
    lpl = LocusPlasticity(4, kernel=k, groups=2).double()
    x = torch.randn(1, 12, 4, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda v: _lpl_conv(lpl, v), x)[0, :, :, 0, :, :]
    reach = jac.abs().sum(dim=(1, 3))  # (t, s)
    t, s = torch.meshgrid(torch.arange(12), torch.arange(12), indexing="ij")
    offset = s - t
    inside = (offset >= -(k // 2)) & (offset <= k - 1 - k // 2)
    assert reach[~inside].abs().max() == 0
    assert (reach[inside] > 0).all()  # and it does reach its whole window


def test_lpl_kernels_are_token_specific():
    lpl = LocusPlasticity(8, kernel=5, groups=2)
    x = torch.randn(1, 10, 8)
    changed = x.clone()
    changed[0, 4] += 1.0
    before, after = lpl.kernels(x), lpl.kernels(changed)
    moved = (before - after).abs().amax(dim=(0, 2, 3))
    assert moved[4] > 1e-3
    assert moved[torch.arange(10) != 4].max() == 0


def test_token_conv_never_unfolds():
    # k shifted multiply-adds: peak extra memory is O(B L d), not B x L x d x k (checked on the
    # autograd graph: no saved tensor has a k-sized axis beyond the kernels' own).
    x = torch.randn(2, 64, 16, requires_grad=True)
    kernels = torch.randn(2, 64, 4, 9, requires_grad=True)
    y = token_conv_reference(x, kernels)
    sizes = set()
    stack = [y.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None:
            continue
        for name in dir(fn):
            if name.startswith("_saved_"):
                value = getattr(fn, name)
                if isinstance(value, torch.Tensor):
                    sizes.add(value.numel())
        stack += [f for f, _ in fn.next_functions]
    assert max(sizes) <= x.numel() + 8 * 16 * 2  # the padded copy of x at most


def _random_spectrum(d, n):
    return torch.randn(d, n // 2 + 1, dtype=torch.complex128)


def test_fft_identity_filter():
    x = torch.randn(2, 11, 3, dtype=torch.float64)
    for pad in ("linear", "circular"):
        n = fft_size(11, pad)
        ones = torch.ones(3, n // 2 + 1, dtype=torch.complex128)
        torch.testing.assert_close(fft_conv(x, ones, n), x)


@pytest.mark.parametrize("length", [7, 16, 33])
def test_fft_linear_equals_numpy_convolve(length):
    rng = np.random.default_rng(length)
    x = rng.standard_normal((1, length, 2))
    h = rng.standard_normal((2, length))
    n = fft_size(length, "linear")
    spectrum = torch.fft.rfft(torch.from_numpy(h), n=n)
    y = fft_conv(torch.from_numpy(x), spectrum, n).numpy()
    for c in range(2):
        np.testing.assert_allclose(y[0, :, c], np.convolve(x[0, :, c], h[c])[:length], atol=1e-10)


@pytest.mark.parametrize("length", [8, 13])
def test_fft_circular_equals_circular_convolution_and_is_shift_equivariant(length):
    rng = np.random.default_rng(length)
    x = rng.standard_normal((1, length, 1))
    h = rng.standard_normal(length)
    spectrum = torch.fft.rfft(torch.from_numpy(h)).unsqueeze(0)
    y = fft_conv(torch.from_numpy(x), spectrum, length).numpy()[0, :, 0]
    brute = [sum(x[0, s, 0] * h[(t - s) % length] for s in range(length)) for t in range(length)]
    np.testing.assert_allclose(y, brute, atol=1e-10)
    shifted = fft_conv(torch.from_numpy(np.roll(x, 3, axis=1)), spectrum, length).numpy()[0, :, 0]
    np.testing.assert_allclose(shifted, np.roll(y, 3), atol=1e-10)


def test_fft_parseval_and_real_output():
    length = 16
    x = torch.randn(1, length, 2, dtype=torch.float64)
    spectrum = _random_spectrum(2, length)
    y = fft_conv(x, spectrum, length)
    assert not torch.is_complex(y)
    # Parseval on the circular grid: sum |y|^2 = (1/n) sum |Y|^2 with Y the Hermitian-completed product
    full = torch.fft.fft(y, dim=1)
    torch.testing.assert_close((y**2).sum(dim=1), (full.abs() ** 2).sum(dim=1) / length)
    # only the real parts of the DC and Nyquist bins matter: their imaginary parts are dropped
    noisy = spectrum.clone()
    noisy[:, 0] += 5j
    noisy[:, -1] += 5j
    torch.testing.assert_close(fft_conv(x, noisy, length), y)


@pytest.mark.parametrize("length", [5, 12, 20, 32])
def test_linear_filter_fit_is_exact_for_every_shorter_length(length):
    d, max_len = 3, 32
    n_from = fft_size(max_len, "linear")
    spectrum = _random_spectrum(d, n_from)
    x = torch.randn(1, length, d, dtype=torch.float64)
    full = fft_conv(F.pad(x, (0, 0, 0, max_len - length)), spectrum, n_from)[:, :length]
    fitted, n = fit_filter(spectrum, n_from, length)
    assert n == fft_size(length, "linear")
    torch.testing.assert_close(fft_conv(x, fitted, n), full)


def test_filter_parameters_do_not_grow_with_max_len():
    sizes = {
        sum(p.numel() for p in DomainPlasticity(8, max_len=m, filter_taps=16).parameters())
        for m in (16, 256, 8192)
    }
    assert len(sizes) == 1
    assert DomainPlasticity(8, filter_taps=16).filter.shape == (8, 16, 2)


def test_sample_spectrum_interpolates_between_knots():
    taps = torch.tensor([[0.0, 2.0 + 2.0j, 4.0]], dtype=torch.complex128)
    # an 8-point grid has 5 bins over the same 0..Nyquist range: knots at bins 0, 2, 4
    expected = torch.tensor(
        [[0.0, 1.0 + 1.0j, 2.0 + 2.0j, 3.0 + 1.0j, 4.0]], dtype=torch.complex128
    )
    torch.testing.assert_close(sample_spectrum(taps, 8), expected)
    # odd grids stop short of Nyquist: 5 points sample frequencies 0, 0.4, 0.8 of Nyquist
    odd = torch.tensor([[0.0, 1.6 + 1.6j, 3.2 + 0.8j]], dtype=torch.complex128)
    torch.testing.assert_close(sample_spectrum(taps, 5), odd)


@pytest.mark.parametrize("n", [8, 9, 256])
def test_imaginary_parts_at_dc_and_nyquist_knots_are_zeroed_not_interpolated(n):
    # a real kernel's response is real at DC and Nyquist; imaginary parts stored at those knots must
    # not leak into the neighbouring bins, which irfft does read
    ends = torch.zeros(1, 5, dtype=torch.complex128)
    ends[0, 0], ends[0, -1] = 3j, -2j
    torch.testing.assert_close(
        sample_spectrum(ends, n), torch.zeros(1, n // 2 + 1, dtype=ends.dtype)
    )
    # so a filter differing from another only there gives the same convolution
    taps = torch.randn(1, 5, dtype=torch.complex128)
    x = torch.randn(1, n // 2, 1, dtype=torch.float64)
    torch.testing.assert_close(
        fft_conv(x, sample_spectrum(taps + ends, 2 * n), 2 * n),
        fft_conv(x, sample_spectrum(taps, 2 * n), 2 * n),
    )


def test_circular_dpl_samples_the_same_response_at_every_length():
    # a response linear in frequency is reproduced exactly on any grid: the circular filter at
    # length L is the rFFT-grid sample of one function of normalised frequency
    dpl = DomainPlasticity(2, max_len=64, pad="circular", use_time=False, filter_taps=5).double()
    with torch.no_grad():
        dpl.filter.copy_(
            torch.view_as_real(torch.linspace(0, 1, 5, dtype=torch.complex128)).expand(2, 5, 2)
        )
    for length in (8, 13, 64):
        spectrum, n = dpl.spectrum(length)
        assert n == length
        grid = torch.arange(n // 2 + 1, dtype=torch.float64) * 2 / n
        torch.testing.assert_close(spectrum[0].real, grid)


def test_dpl_length_limit_and_interpolation():
    dpl = DomainPlasticity(4, max_len=16)
    with pytest.raises(ValueError, match="exceeds dpl_max_len=16"):
        dpl(torch.randn(1, 40, 4))
    dpl.length_extrapolation = "interpolate"
    assert dpl(torch.randn(1, 40, 4)).shape == (1, 40, 4)


def test_dpl_circular_refuses_padded_batches():
    dpl = DomainPlasticity(4, max_len=16, pad="circular")
    mask = torch.ones(1, 10)
    mask[0, 7:] = 0
    with pytest.raises(ValueError, match="pad='linear'"):
        dpl(torch.randn(1, 10, 4), mask)


def test_spl_shrinks_and_saturates_to_identity():
    spl = SaliencyPlasticity(8)
    x = torch.randn(3, 10, 8)
    y, alpha = spl(x)
    assert alpha.shape == (3, 10)
    assert (y.abs() <= x.abs()).all()
    assert (y.abs() < x.abs()).any()
    with torch.no_grad():
        spl.token.bias.fill_(1e4)
        spl.excite.bias.fill_(1e4)
    y, alpha = spl(x)
    torch.testing.assert_close(y, x)
    assert torch.equal(alpha, torch.ones_like(alpha))


@pytest.mark.parametrize("spl_mode", ["residual", "gate"])
@pytest.mark.parametrize("fusion", ["gate", "concat"])
def test_block_padding_invariance(spl_mode, fusion):
    block = SPUBlock(8, lpl_groups=2, dpl_max_len=32, spl_mode=spl_mode, dpl_fusion=fusion).eval()
    x = torch.randn(1, 12, 8)
    padded = torch.cat([x, 100 * torch.randn(1, 9, 8)], dim=1)
    mask = torch.zeros(1, 21)
    mask[0, :12] = 1
    y, alpha = block(x)
    y_pad, alpha_pad = block(padded, mask)
    torch.testing.assert_close(y_pad[:, :12], y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha_pad[:, :12], alpha, atol=1e-6, rtol=1e-6)
    assert (alpha_pad[:, 12:] == 0).all()


def test_block_ablation_flags_remove_layers():
    full = SPUBlock(8, lpl_groups=2, dpl_max_len=16)
    no_lpl = SPUBlock(8, lpl_groups=2, dpl_max_len=16, use_lpl=False)
    no_freq = SPUBlock(8, lpl_groups=2, dpl_max_len=16, use_dpl_freq=False)
    no_spl = SPUBlock(8, lpl_groups=2, dpl_max_len=16, use_spl=False)
    assert full.lpl is not None and no_lpl.lpl is None
    assert not hasattr(no_freq.dpl, "filter") and hasattr(full.dpl, "filter")
    assert no_spl(torch.randn(1, 10, 8))[1] is None
    with pytest.raises(ValueError, match="at least one"):
        SPUBlock(8, use_lpl=False, use_dpl_time=False, use_dpl_freq=False, use_spl=False)


def test_lpl_without_softmax_uses_the_raw_generator_logits():
    x = torch.randn(2, 10, 8)
    raw = LocusPlasticity(8, kernel=5, groups=2, softmax=False)
    expected = (x @ raw.generator.weight.T + raw.generator.bias).view(2, 10, 2, 5)
    torch.testing.assert_close(raw.kernels(x), expected)
    assert not torch.allclose(raw.kernels(x).sum(-1), torch.ones(2, 10, 2))
    # negative control: with the softmax every kernel is a distribution over its taps
    soft = LocusPlasticity(8, kernel=5, groups=2)
    soft.load_state_dict(raw.state_dict())
    torch.testing.assert_close(soft.kernels(x), expected.softmax(-1))


def test_dpl_gate_fusion_weights_the_time_branch_by_the_gate():
    dpl = DomainPlasticity(6, time_kernel=3, max_len=16).double()
    x = torch.randn(2, 11, 6, dtype=torch.float64)
    gate = torch.sigmoid(x @ dpl.fusion_gate.weight.T + dpl.fusion_gate.bias)
    short = F.conv1d(
        x.transpose(1, 2), dpl.time_conv.weight, dpl.time_conv.bias, padding=1, groups=6
    )
    y_time = short.transpose(1, 2) * torch.sigmoid(dpl.time_gate(x))
    y_freq = dpl.freq_branch(x)
    expected = dpl.out_proj(gate * y_time + (1 - gate) * y_freq)
    torch.testing.assert_close(dpl(x), expected)
    swapped = dpl.out_proj(gate * y_freq + (1 - gate) * y_time)
    assert not torch.allclose(swapped, expected)  # the test tells the two fusions apart


def test_spl_is_token_times_channel_saliency_times_x():
    spl = SaliencyPlasticity(8, reduction=2).double()
    x = torch.randn(3, 10, 8, dtype=torch.float64)
    mask = torch.ones(3, 10)
    mask[1, 6:] = 0
    m = mask.double().unsqueeze(-1)
    alpha = torch.sigmoid(x @ spl.token.weight.T + spl.token.bias).squeeze(-1) * mask
    mean = (x * m).sum(1) / m.sum(1)
    hidden = torch.relu(mean @ spl.squeeze.weight.T + spl.squeeze.bias)
    beta = torch.sigmoid(hidden @ spl.excite.weight.T + spl.excite.bias)  # (B, d)
    y, a = spl(x, mask)
    torch.testing.assert_close(a, alpha.double())
    torch.testing.assert_close(y, alpha.unsqueeze(-1) * beta.unsqueeze(1) * x)
    assert (beta < 0.99).any()  # the channel factor is not a no-op here
