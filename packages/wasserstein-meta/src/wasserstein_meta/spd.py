"""Symmetric positive definite matrices as unconstrained Cholesky parameters.

``M = L Lᵀ`` with ``L`` lower-triangular and a log-parameterised diagonal (the base code's
``utils/params.py``): every real parameter vector gives an SPD matrix, so gradient steps never leave
the cone, and a diagonal parameter ``d`` gives eigenvalue ``exp(2 d)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def tril_size(dim: int) -> int:
    return dim * (dim + 1) // 2


def spd_from_params(params: torch.Tensor, dim: int) -> torch.Tensor:
    """``L Lᵀ`` from the ``dim (dim + 1) / 2`` free numbers: log-diagonal first, then the strict lower part."""
    L = tril_from_params(params, dim)
    return L @ L.T


def tril_from_params(params: torch.Tensor, dim: int) -> torch.Tensor:
    """The Cholesky factor ``L`` (lower-triangular, positive diagonal) of :func:`spd_from_params`."""
    if params.shape[-1] != tril_size(dim):
        raise ValueError(
            f"need {tril_size(dim)} Cholesky parameters for a {dim}x{dim} matrix, "
            f"got {params.shape[-1]}"
        )
    if params.dim() != 1:
        raise ValueError(f"Cholesky parameters must be a vector, got shape {tuple(params.shape)}")
    rows, cols = torch.tril_indices(dim, dim, offset=-1, device=params.device)
    return torch.diag(torch.exp(params[:dim])).index_put((rows, cols), params[dim:])


def params_from_spd(matrix: torch.Tensor, name: str = "matrix") -> torch.Tensor:
    """The Cholesky parameters of an SPD ``matrix``; ``ValueError`` naming ``name`` if it is not SPD."""
    matrix = torch.as_tensor(matrix, dtype=torch.get_default_dtype())
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {tuple(matrix.shape)}")
    if not torch.isfinite(matrix).all():
        raise ValueError(f"{name} must be finite, got {matrix.tolist()}")
    if not torch.allclose(matrix, matrix.T, atol=1e-10, rtol=1e-8):
        raise ValueError(f"{name} must be symmetric positive definite (it is not symmetric)")
    L, info = torch.linalg.cholesky_ex(matrix)
    if int(info) != 0:
        raise ValueError(f"{name} must be symmetric positive definite (it has eigenvalue <= 0)")
    dim = matrix.shape[0]
    rows, cols = torch.tril_indices(dim, dim, offset=-1, device=matrix.device)
    return torch.cat([torch.log(torch.diagonal(L)), L[rows, cols]])


def as_spd_params(
    value: float | torch.Tensor,
    dim: int,
    name: str,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Cholesky parameters for a gain given as a positive scalar (``value · I``) or an SPD matrix,
    on ``device`` (default: torch's default device)."""
    if isinstance(value, (int, float)):
        if not value > 0:
            raise ValueError(f"{name} must be positive (a scalar gain means {name}·I), got {value}")
        params = torch.zeros(tril_size(dim), device=device)
        params[:dim] = 0.5 * math.log(float(value))
        return params
    matrix = torch.as_tensor(value, dtype=torch.get_default_dtype())
    if matrix.shape != (dim, dim):
        raise ValueError(
            f"{name} must be a scalar or a {dim}x{dim} matrix, got {tuple(matrix.shape)}"
        )
    return params_from_spd(matrix, name).to(device)


class SPDParameter(nn.Module):
    """One learnable SPD matrix; ``module()`` returns it."""

    def __init__(self, dim: int, init: float | torch.Tensor = 1.0, name: str = "matrix"):
        super().__init__()
        self.dim = dim
        self.params = nn.Parameter(as_spd_params(init, dim, name))

    def forward(self) -> torch.Tensor:
        return spd_from_params(self.params, self.dim)

    def factor(self) -> torch.Tensor:
        """``L`` with ``L Lᵀ`` the matrix."""
        return tril_from_params(self.params, self.dim)


class PDGains(nn.Module):
    """The controller's gains Λ (error-to-sliding), K (sliding feedback), Γ (adaptation), all SPD.

    Each is a positive scalar (times the identity) or an SPD matrix; a matrix that is not SPD raises
    ``ValueError("Λ must be symmetric positive definite ...")``. Learnable through their Cholesky
    parameters.
    """

    def __init__(
        self,
        dim: int = 3,
        Lambda: float | torch.Tensor = 1.0,
        K: float | torch.Tensor = 1.0,
        Gamma: float | torch.Tensor = 1.0,
    ):
        super().__init__()
        self.dim = dim
        self.Lambda_ = SPDParameter(dim, Lambda, "Λ")
        self.K_ = SPDParameter(dim, K, "K")
        self.Gamma_ = SPDParameter(dim, Gamma, "Γ")

    @property
    def Lambda(self) -> torch.Tensor:
        return self.Lambda_()

    @property
    def K(self) -> torch.Tensor:
        return self.K_()

    @property
    def Gamma(self) -> torch.Tensor:
        return self.Gamma_()
