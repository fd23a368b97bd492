import warnings

import pytest
import torch
from ssn_lateral import SSN, ConvergenceWarning, SSNDivergenceError, SSNParams
from ssn_testnets import random_net, two_pop


def test_divergence_names_contrast_step_and_rate():
    net = two_pop(SSNParams(dt=0.5, t_max=2000.0))
    net.W_ii.data.fill_(0.0)
    net.W_ei.data.fill_(0.1)  # det(W) < 0: runaway excitation
    with pytest.raises(
        SSNDivergenceError, match=r"contrast 20.0 on Euler step \d+: max rate .* > r_max=1000"
    ):
        net.steady_state(torch.ones(1, 1, dtype=torch.float64), contrast=20.0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"dt": 6.0}, "dt must be in"),
        ({"dt": 0.0}, "dt must be in"),
        ({"n": 0.5}, "n .power-law exponent. must be >= 1"),
        ({"k": 0.0}, "k .gain. must be > 0"),
        ({"k": float("nan")}, "finite"),
        ({"tau_e": -1.0}, "time constants"),
        ({"tol": 0.0}, "tol and r_max"),
        ({"check_every": 0}, "check_every"),
    ],
)
def test_bad_params(kw, match):
    with pytest.raises(ValueError, match=match):
        SSNParams(**kw)


def test_negative_blocks_under_dale():
    net = SSN(2, 1, 3)
    with pytest.raises(ValueError, match="W_ee has 1 negative entries"):
        net.set_weights(W_ee=torch.tensor([[0.0, -1.0], [0.5, 0.0]]))
    with pytest.warns(UserWarning, match="projected 1 negative entries of W_ee"):
        net.set_weights(W_ee=torch.tensor([[0.0, -1.0], [0.5, 0.0]]), project=True)
    assert float(net.W_ee.min()) == 0.0
    with pytest.raises(ValueError, match="Q_e has"):
        net.set_weights(Q_e=-torch.ones(2, 6))
    SSN(2, 1, 3, signed_input=True).set_weights(Q_e=-torch.ones(2, 3))  # signed input: Q signed
    SSN(2, 1, 3, dale=False).set_weights(W_ee=-torch.ones(2, 2))
    with pytest.raises(ValueError, match="shape"):
        net.set_weights(W_ei=torch.ones(3, 3))
    with pytest.raises(ValueError, match="unknown block"):
        net.set_weights(W_xx=torch.ones(1))


def test_no_inhibition_with_lateral_warns():
    with pytest.warns(UserWarning, match="no inhibition"):
        SSN(3, 0, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SSN(3, 0, 2, lateral=False)


def test_bad_inputs():
    net = random_net()
    x = torch.ones(2, 4, dtype=torch.float64)
    for kw, match in (
        ({"contrast": 0.0}, "contrast"),
        ({"contrast": -1.0}, "contrast"),
        ({"noise": -0.1}, "noise"),
    ):
        with pytest.raises(ValueError, match=match):
            net.steady_state(x, **kw)
    with pytest.raises(ValueError, match="NaN"):
        net.steady_state(torch.full((1, 4), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match=r"shape \(batch, 4\)"):
        net.steady_state(torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="r0 must have shape"):
        net.steady_state(x, r0=torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="n_e"):
        SSN(0, 1, 1)


def test_no_convergence_warns_with_the_residual():
    net = random_net(params=SSNParams(dt=1.0, t_max=5.0, tol=1e-12))
    with pytest.warns(ConvergenceWarning, match=r"did not converge within t_max=5 ms .* residual"):
        r, info = net.steady_state(torch.ones(2, 4, dtype=torch.float64) * 5, return_info=True)
    assert not info.converged.any() and torch.isfinite(r).all()


def test_simulate_raises_on_divergence_like_steady_state():
    # the reviewer's case: W_ee = 3 is unstable at c = 20; simulate used to return NaN frames
    net = two_pop(SSNParams(dt=0.5, t_max=2000.0))
    net.W_ee.data.fill_(3.0)
    x = torch.ones(1, 1, dtype=torch.float64)
    with pytest.raises(
        SSNDivergenceError, match=r"contrast 20.0 on Euler step \d+: max rate .* > r_max=1000"
    ):
        net.simulate(x, 2000.0, contrast=20.0)
    # r_max = 1e300: the overflow to inf is caught on the step it appears, with the last finite max
    inf_net = two_pop(SSNParams(dt=0.5, t_max=2000.0, r_max=1e300))
    inf_net.W_ee.data.fill_(3.0)
    with pytest.raises(SSNDivergenceError, match=r"non-finite rate \(last finite max rate \d"):
        inf_net.simulate(x, 2000.0, contrast=20.0)
    with pytest.raises(SSNDivergenceError, match=r"non-finite rate \(last finite max rate \d"):
        inf_net.steady_state(x, contrast=20.0)


def test_more_bad_inputs():
    from ssn_lateral import SSNEncoder

    net = two_pop()
    x = torch.ones(1, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="t must be a finite duration >= 0"):
        net.simulate(x, -1.0)
    with pytest.raises(ValueError, match="r0 must be finite, non-negative"):
        net.steady_state(x, r0=-torch.ones(1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="r0 must be finite, non-negative"):
        net.simulate(x, 10.0, r0=-torch.ones(1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"r must have shape \(batch, 2\)"):
        net.jacobian(torch.ones(1, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"torch\.bfloat16"):
        net.to(torch.bfloat16).steady_state(x.to(torch.bfloat16), contrast=10.0)
    with pytest.raises(ValueError, match=r"target_rates must be two finite rates > 0"):
        SSNEncoder(4, target_rates=(-1.0, 2.0), n_iter=0).fit(torch.randn(10, 4).numpy())
