"""LIF against hand-computed spike trains and the equations; surrogates against their derivatives;
a seconds-long training run of the tiny Spikformer with AdaS."""

import pytest
import torch
from adas_optim import AdaS
from adas_optim.snn import (
    LIF,
    ATanSurrogate,
    QKTokenAttention,
    SigmoidSurrogate,
    TinySpikformer,
    digits_to_tokens,
    reset_net,
)


def test_constant_input_spike_train_by_hand():
    # X = 1.5, τ = 2, V_th = 1, hard reset to 0: H1 = 0.75, H2 = 0.75 + (1.5 - 0.75)/2 = 1.125 → spike,
    # V2 = 0, then the same again.
    x = torch.full((6, 1), 1.5)
    s = LIF(tau=2.0)(x)
    assert s.squeeze(1).tolist() == [0, 1, 0, 1, 0, 1]


def lif_by_equations(x, tau, v_th, v_reset, decay_input):
    v = 0.0 if v_reset is None else v_reset
    base = 0.0 if v_reset is None else v_reset
    out = []
    for xt in x.tolist():
        h = v + (xt - (v - base)) / tau if decay_input else v - (v - base) / tau + xt
        s = 1.0 if h >= v_th else 0.0
        v = h - v_th * s if v_reset is None else h * (1 - s) + v_reset * s
        out.append(s)
    return out


@pytest.mark.parametrize("v_reset", [0.0, -0.3, None])
@pytest.mark.parametrize("decay_input", [True, False])
def test_lif_matches_the_equations(v_reset, decay_input):
    x = torch.rand(40, generator=torch.Generator().manual_seed(0)) * 1.5
    lif = LIF(tau=3.0, v_threshold=0.7, v_reset=v_reset, decay_input=decay_input)
    got = lif(x[:, None])[:, 0].tolist()
    want = lif_by_equations(x, 3.0, 0.7, v_reset, decay_input)
    assert got == want
    assert 0 < sum(got) < len(got)  # the input must make it fire sometimes, not always


@pytest.mark.parametrize(
    "surrogate", [SigmoidSurrogate(4.0), ATanSurrogate(2.0), SigmoidSurrogate(1.5)]
)
def test_surrogate_gradient_is_the_derivative_of_its_primitive(surrogate):
    x = torch.linspace(-2, 2, 81, dtype=torch.float64, requires_grad=True)
    surrogate(x).sum().backward()
    h = 1e-6
    with torch.no_grad():
        numeric = (surrogate.primitive(x + h) - surrogate.primitive(x - h)) / (2 * h)
    torch.testing.assert_close(x.grad, numeric, rtol=1e-7, atol=1e-9)
    assert surrogate(x.detach()).tolist() == (x >= 0).double().tolist()


def test_sigmoid_surrogate_is_spikingjelly_formula():
    x = torch.linspace(-1, 1, 11, dtype=torch.float64, requires_grad=True)
    SigmoidSurrogate(4.0)(x).sum().backward()
    s = torch.sigmoid(4.0 * x.detach())
    torch.testing.assert_close(x.grad, 4.0 * s * (1 - s))


def test_lif_gradcheck_through_the_surrogate_in_float64():
    # The surrogate backward is the derivative of a smooth twin: gradcheck the LIF with the twin in
    # place of Θ, where finite differences are defined, and compare with our backward.
    class Smooth(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(4.0 * x)

    x = torch.rand(5, 3, dtype=torch.float64, requires_grad=True)
    smooth = LIF(surrogate=Smooth(), detach_reset=False)
    assert torch.autograd.gradcheck(smooth, (x,))


def test_state_follows_input_device_dtype_and_does_not_leak():
    lif = LIF()
    a = lif(torch.full((3, 2), 1.5, dtype=torch.float64))
    assert a.dtype == torch.float64
    b = lif(torch.full((3, 5), 1.5, dtype=torch.float64))  # other batch size: no stale state
    assert b.shape == (3, 5)
    assert torch.equal(a[:, 0], b[:, 0])
    reset_net(torch.nn.Sequential(lif))  # a no-op for our stateless neurons


def test_qk_token_attention_shapes_and_spikes():
    attn = QKTokenAttention(16, heads=4)
    y = attn(torch.rand(2, 3, 5, 16))
    assert y.shape == (2, 3, 5, 16)
    assert set(y.unique().tolist()) <= {0.0, 1.0}


def test_digits_to_tokens():
    img = torch.arange(64.0).view(1, 8, 8)
    tok = digits_to_tokens(img)
    assert tok.shape == (1, 16, 4)
    assert tok[0, 0].tolist() == [0.0, 1.0, 8.0, 9.0]
    assert tok[0, 1].tolist() == [2.0, 3.0, 10.0, 11.0]


def digits_split(n_train):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits_to_tokens(torch.tensor(digits.images / 16.0, dtype=torch.float32))
    y = torch.tensor(digits.target)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    return x[perm[:n_train]], y[perm[:n_train]], x[perm[1200:]], y[perm[1200:]]


def test_adas_trains_tiny_spikformer_on_digits_well_above_chance():
    # QKFormer attention (the SSA model trains in the reproduction's smoke test).
    x, y, x_test, y_test = digits_split(640)
    torch.manual_seed(0)
    model = TinySpikformer(dim=32, mlp_ratio=2, attention="qk")
    opt = AdaS(model.parameters(), lr=1e-2, gamma=1.0)
    for _epoch in range(5):
        for idx in torch.randperm(len(y)).split(32):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            assert torch.isfinite(loss)
    model.eval()
    with torch.no_grad():
        acc = (model(x_test).argmax(1) == y_test).float().mean().item()
    assert acc > 0.5, acc  # chance is 0.1
    assert min(float(v) for v in opt.last_lambda.values()) < 1.0  # the mixing was active
