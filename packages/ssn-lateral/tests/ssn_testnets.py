"""Small networks the tests share: the spec's two-population SSN and a random stable E-I network."""

from __future__ import annotations

import torch
from ssn_lateral import SSN, SSNParams

TWO_POP = {"W_ee": 1.25, "W_ei": 0.65, "W_ie": 1.2, "W_ii": 0.5}


def two_pop(params: SSNParams | None = None) -> SSN:
    """Spec section 2.2: h = c (1, 1) as a one-channel signed input with Q = (1, 1)."""
    net = SSN(1, 1, 1, params or SSNParams(dt=1.0, t_max=4000.0, tol=1e-11), signed_input=True)
    net = net.double()
    one = torch.ones(1, 1, dtype=torch.float64)
    net.set_weights(**{k: v * one for k, v in TWO_POP.items()}, Q_e=one, Q_i=one)
    return net


def random_net(n_e: int = 6, n_i: int = 3, n_in: int = 4, seed: int = 0, **kw) -> SSN:
    """A random Dale's-law network whose rows sum to the two-population values (stable at c ~ 1)."""
    from ssn_lateral.plasticity import project_

    g = torch.Generator().manual_seed(seed)
    params = kw.pop("params", SSNParams(dt=1.0, t_max=6000.0, tol=1e-10))
    net = SSN(n_e, n_i, n_in, params, **kw).double()
    for name in ("W_ee", "W_ei", "W_ie", "W_ii", "Q_e", "Q_i"):
        block = getattr(net, name)
        block.data.copy_(torch.rand(block.shape, generator=g, dtype=torch.float64))
    project_(net)
    return net
