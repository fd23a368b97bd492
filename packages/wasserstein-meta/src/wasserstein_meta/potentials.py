"""Bregman potentials ψ that set the geometry of the adaptation law.

Every law here is mirror descent in continuous time on the Lyapunov-stable adaptive controller:
``d/dt ∇ψ(â) = g`` with ``g = vec(Γ s yᵀ)``. Parameters are the rows of ``Â ∈ R^{d×m}`` flattened
row-major: ``a = Â.reshape(-1)``, so ``Â y = a.view(d, m) @ y``.

A potential says in which coordinates the simulator integrates (``mode``):

* ``"primal"``: the state is ``â``, ``â̇ = [∇²ψ(â)]⁻¹ g`` (``hess_solve``);
* ``"mirror"``: the state is ``ζ = ∇ψ(â)``, ``ζ̇ = g``, ``â = ∇ψ*(ζ)`` (``conj_grad``);
* ``"dual"``: mirror descent with ψ* as potential: ``ζ̇ = g``, ``â = ∇ψ(ζ)`` (``grad``).

The Lyapunov function of the closed loop is ``½ sᵀHs + D(a*, â)`` with ``D`` the Bregman divergence
of the potential actually used (ψ in primal/mirror modes, ψ* in dual mode); :meth:`lyapunov` gives it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Literal

import torch
from torch import nn

from wasserstein_meta.spd import as_spd_params, spd_from_params

Mode = Literal["primal", "mirror", "dual"]


class BregmanPotential(nn.Module):
    """Base class: subclass and implement ``value``, ``grad``, ``hess_solve`` and ``conj_grad``.

    All take a batch ``(B, n)`` and return ``(B,)`` (``value``) or ``(B, n)``.
    """

    mode: Mode = "primal"

    def bind(self, n: int) -> None:
        """Called by the controller with the number of adapted parameters ``n = d·m``."""

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Within a rollout the meta-parameters are fixed: a potential may cache what it derives."""
        yield

    def value(self, a: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def grad(self, a: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def hess_solve(self, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """``[∇²ψ(a)]⁻¹ g``."""
        raise NotImplementedError

    def conj_grad(self, z: torch.Tensor) -> torch.Tensor:
        """``∇ψ*(z)``, the inverse of :meth:`grad`."""
        raise NotImplementedError

    # -- the adaptation law in the coordinates of ``mode`` --------------------------------------
    def initial_state(self, batch: int, n: int, like: torch.Tensor) -> torch.Tensor:
        """The state at t = 0: zero (``â = 0`` in primal/mirror mode, ``ζ = 0`` in dual mode)."""
        return like.new_zeros(batch, n)

    def estimate(self, state: torch.Tensor) -> torch.Tensor:
        """``â`` from the integrated state."""
        if self.mode == "primal":
            return state
        if self.mode == "mirror":
            return self.conj_grad(state)
        return self.grad(state)

    def state_rate(self, state: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """d(state)/dt for the adaptation drive ``g = vec(Γ s yᵀ)``."""
        return self.hess_solve(state, g) if self.mode == "primal" else g

    def lyapunov(self, a_star: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The parameter term ``D(a*, â)`` of the Lyapunov function, for the potential in use."""
        if self.mode == "primal":
            return bregman_divergence(self, a_star, state)
        if self.mode == "mirror":
            return bregman_divergence(self, a_star, self.conj_grad(state))
        # D_{ψ*}(a*, â) = D_ψ(∇ψ*(â), ∇ψ*(a*)) and ∇ψ*(â) = ζ.
        return bregman_divergence(self, state, self.conj_grad(a_star))


def bregman_divergence(pot: BregmanPotential, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``D_ψ(a, b) = ψ(a) − ψ(b) − ∇ψ(b)ᵀ(a − b)`` row by row."""
    return pot.value(a) - pot.value(b) - (pot.grad(b) * (a - b)).sum(-1)


def _rows(a: torch.Tensor, d: int) -> torch.Tensor:
    if a.shape[-1] % d:
        raise ValueError(f"parameter vector of length {a.shape[-1]} is not d·m with d = {d}")
    return a.reshape(*a.shape[:-1], d, a.shape[-1] // d)


class Quadratic(BregmanPotential):
    """``ψ(a) = ½ vec(Â)ᵀ (P ⊗ I)⁻¹ vec(Â)``: the Euclidean law ``Â̇ = P Γ s yᵀ`` (Richards et al.).

    With Γ = I this is the published law ``Â̇ = P s yᵀ`` exactly. ``P`` is a positive scalar or a
    d×d SPD matrix, fixed (meta-learn Γ instead: the two enter only as the product).
    """

    mode: Mode = "primal"

    P: torch.Tensor

    def __init__(self, P: float | torch.Tensor = 1.0, dim: int = 3):
        super().__init__()
        self.dim = dim
        self.register_buffer("P", spd_from_params(as_spd_params(P, dim, "P"), dim))

    def value(self, a: torch.Tensor) -> torch.Tensor:
        A = _rows(a, self.dim)
        return 0.5 * (A * torch.linalg.solve(self.P, A)).sum((-1, -2))

    def grad(self, a: torch.Tensor) -> torch.Tensor:
        return torch.linalg.solve(self.P, _rows(a, self.dim)).reshape(a.shape)

    def hess_solve(self, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return (self.P @ _rows(g, self.dim)).reshape(g.shape)

    def conj_grad(self, z: torch.Tensor) -> torch.Tensor:
        return self.hess_solve(z, z)


class LpNorm(BregmanPotential):
    """``ψ(a) = ½‖a‖²_p``, p > 1 (Tang, Sun & Azizan's mirror-descent adaptation), in mirror mode.

    ``∇ψ*(ζ) = ‖ζ‖_q^{2−q} sign(ζ)|ζ|^{q−1}`` with ``1/p + 1/q = 1``: closed form, no inner solve.
    ``learnable=True`` meta-learns p through ``p = 1 + exp(raw)``.
    """

    mode: Mode = "mirror"

    def __init__(self, p: float = 2.0, learnable: bool = True):
        super().__init__()
        if not (isinstance(p, (int, float)) and math.isfinite(p) and p > 1):
            raise ValueError(f"p must be > 1 for a strictly convex ℓp potential, got {p}")
        self.raw = nn.Parameter(torch.tensor(math.log(p - 1.0)), requires_grad=learnable)

    @property
    def p(self) -> torch.Tensor:
        return 1.0 + torch.exp(self.raw)

    @property
    def q(self) -> torch.Tensor:
        p = self.p
        return p / (p - 1.0)

    @staticmethod
    def _norm_grad(a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        # Clamped so that the derivative at an exact zero (the initial state) is finite, not NaN.
        mag = a.abs().clamp_min(1e-30)
        norm = (mag**p).sum(-1, keepdim=True) ** (1.0 / p)
        return norm ** (2.0 - p) * torch.sign(a) * mag ** (p - 1.0)

    def value(self, a: torch.Tensor) -> torch.Tensor:
        p = self.p
        return 0.5 * ((a.abs() ** p).sum(-1) ** (2.0 / p))

    def grad(self, a: torch.Tensor) -> torch.Tensor:
        return self._norm_grad(a, self.p)

    def conj_grad(self, z: torch.Tensor) -> torch.Tensor:
        return self._norm_grad(z, self.q)

    def hess_solve(self, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        # ∇²ψ = c·diag(|a|^{p−2}) + (2−p)‖a‖^{2−2p} w wᵀ, c = (p−1)‖a‖^{2−p}, w = sign|a|^{p−1}:
        # diagonal plus rank one, solved by Sherman–Morrison.
        p = self.p
        mag = a.abs().clamp_min(1e-30)
        norm = (mag**p).sum(-1, keepdim=True) ** (1.0 / p)
        diag = (p - 1.0) * norm ** (2.0 - p) * mag ** (p - 2.0)
        w = torch.sign(a) * mag ** (p - 1.0)
        beta = (2.0 - p) * norm ** (2.0 - 2.0 * p)
        dg, dw = g / diag, w / diag
        return dg - dw * beta * (w * dg).sum(-1, keepdim=True) / (
            1 + beta * (w * dw).sum(-1, keepdim=True)
        )


class WassersteinBregman(BregmanPotential):
    """The entropic Brenier potential of a task measure ν = Σ ν_k δ_{a_k}, plus a quadratic floor.

    ``ψ(a) = (λ/2)‖a‖² + ε log Σ_k ν_k exp((aᵀQa_k − ½ a_kᵀQa_k)/ε)``: ``ψ − (λ/2)‖·‖²`` is
    ``½‖a‖²_Q`` minus the entropic c-transform of ν for the ground cost ``½(a − b)ᵀQ(a − b)``, so
    ``D_ψ`` is a Bregman divergence generated by an optimal-transport potential onto the tasks.
    In closed form (log-domain, no Sinkhorn iterations):

    * ``π(a) = softmax_k((aᵀQa_k − ½‖a_k‖²_Q)/ε + log ν_k)``: attention of ``a`` over the tasks;
    * ``∇ψ(a) = λa + Σ_k π_k Qa_k`` (λa + the entropic barycentric map);
    * ``∇²ψ(a) = λI + Q Cov_π(a_k) Q / ε ⪰ λI``, solved by Woodbury in O(n K²).

    ``atoms`` is a ``(K, n)`` tensor, or ``"ensemble"``: :func:`~wasserstein_meta.meta_train` sets
    them every meta-step to the least-squares parameters of each training task under the current
    features (call :meth:`set_atoms` yourself otherwise). ``Q`` is a positive scalar (a learnable
    diagonal Q initialised at ``Q·I``) or an SPD ``(n, n)`` matrix (a learnable full Cholesky factor).
    ``eps`` and ``lam`` are learnable in log space unless ``learn_geometry=False`` (``learn_lam``
    alone switches λ off: λ scales the adaptation gain, a Euclidean law has no such scalar).
    ``eps="auto"`` starts ε, when the atoms are first set, at ``AUTO_EPS_SCALE`` (0.05) times the
    median pairwise ground cost ``½‖a_i − a_j‖²_Q`` of the atoms: the entropic plan between the tasks
    is then close to the exact one, not to the independent coupling (ε of the order of the costs
    makes the potential quadratic, the Euclidean law again).

    ``centre=True`` (dual mode only) measures the dual state from the atoms' barycentre
    ``ā = Σ ν_k a_k``: the logits use ``a_k − ā`` and ψ gains the linear term ``aᵀQā``, so
    ``∇ψ(a) = λa + Σ_k π_k Qa_k`` keeps its form while ζ = 0 (where every flight starts) sits
    between the tasks, not at the origin of the parameter space, which can lie far from all of
    them (one atom would then win the attention outright). The Hessian is that of the uncentred
    potential at ``a + ā``.

    ``zero_start=True`` (dual mode only) starts the dual state at ``ζ(0) = ∇ψ*(0)`` instead of 0,
    so that the estimate starts at ``â(0) = ∇ψ(ζ(0)) = 0`` as in the base framework (``Â(0) = 0``)
    and as the Euclidean and primal laws do. The law ``ζ̇ = g`` and its Lyapunov function are
    unchanged; only the starting point moves. From ζ = 0 the dual estimate starts at
    ``∇ψ(0) = Σ_k π_k(0) Qa_k``, a task's parameters, not at 0.

    Given atoms are a buffer (``learnable_atoms=True``: a parameter from construction, or from the
    first :meth:`set_atoms` for ``"ensemble"``, which :func:`~wasserstein_meta.meta_train` calls
    before it builds its optimizer): they are in ``state_dict`` and follow ``.to()``/``.double()``.
    A potential built from given atoms takes their dtype.
    """

    AUTO_EPS_SCALE = 0.05

    def __init__(
        self,
        atoms: torch.Tensor | Literal["ensemble"] = "ensemble",
        eps: float | Literal["auto"] = "auto",
        lam: float = 1.0,
        Q: float | torch.Tensor = 1.0,
        mode: Literal["primal", "dual"] = "dual",
        weights: torch.Tensor | None = None,
        learnable_atoms: bool = False,
        learn_geometry: bool = True,
        learn_lam: bool | None = None,
        centre: bool = True,
        zero_start: bool = False,
    ):
        super().__init__()
        self._eps_auto = eps == "auto"
        eps = 1.0 if eps == "auto" else eps
        for name, val in (("eps", eps), ("lam", lam)):
            if not (isinstance(val, (int, float)) and math.isfinite(val) and val > 0):
                raise ValueError(f"{name} must be a positive finite number, got {val}")
        if mode not in ("primal", "dual"):
            raise ValueError(f"mode must be 'primal' or 'dual', got {mode!r}")
        self.mode = mode
        self.centre = bool(centre) and mode == "dual"
        if zero_start and mode != "dual":
            raise ValueError("zero_start applies to mode='dual' only (the primal state is â)")
        self.zero_start = bool(zero_start)
        self.learnable_atoms = learnable_atoms
        self.learn_geometry = learn_geometry
        self.log_eps = nn.Parameter(torch.tensor(math.log(eps)), requires_grad=learn_geometry)
        learn_lam = learn_geometry if learn_lam is None else learn_lam
        self.log_lam = nn.Parameter(torch.tensor(math.log(lam)), requires_grad=learn_lam)
        self._Q_init = Q
        self._weights = weights
        self.n: int | None = None
        self.atoms_source = "ensemble" if isinstance(atoms, str) else "given"
        self.register_buffer("_atoms", None)
        if isinstance(atoms, str):
            if atoms != "ensemble":
                raise ValueError(f"atoms must be a (K, n) tensor or 'ensemble', got {atoms!r}")
        else:
            atoms = _check_atoms(atoms, None)
            self.bind(atoms.shape[1])
            # The user's atoms keep their precision and device; the geometry follows.
            self.to(device=atoms.device, dtype=atoms.dtype)
            self.set_atoms(atoms)

    # -- geometry -------------------------------------------------------------------------------
    def bind(self, n: int) -> None:
        if self.n is not None:
            if n != self.n:
                raise ValueError(
                    f"potential is bound to n = {self.n} parameters, controller has {n}"
                )
            return
        self.n = n
        Q = self._Q_init
        if isinstance(Q, (int, float)):
            if not Q > 0:
                raise ValueError(f"Q must be a positive scalar or an SPD matrix, got {Q}")
            self.Q_log_diag = nn.Parameter(
                torch.full((n,), math.log(Q)), requires_grad=self.learn_geometry
            )
            self.Q_chol = None
        else:
            params = as_spd_params(torch.as_tensor(Q), n, "Q")
            self.Q_chol = nn.Parameter(params, requires_grad=self.learn_geometry)

    @property
    def eps(self) -> torch.Tensor:
        return torch.exp(self.log_eps)

    @property
    def lam(self) -> torch.Tensor:
        return torch.exp(self.log_lam)

    @property
    def Q(self) -> torch.Tensor:
        if self.n is None:
            raise RuntimeError("the potential is not bound to a parameter count yet")
        if self.Q_chol is not None:
            return spd_from_params(self.Q_chol, self.n)
        return torch.diag(torch.exp(self.Q_log_diag))

    # -- atoms ----------------------------------------------------------------------------------
    def set_atoms(self, atoms: torch.Tensor) -> None:
        """Set the task atoms ``(K, n)`` (kept differentiable: gradients reach the features)."""
        if isinstance(atoms, torch.Tensor) and atoms.device != self.log_eps.device:
            raise ValueError(
                f"device mismatch: atoms on {atoms.device}, the potential on "
                f"{self.log_eps.device}: move one of them"
            )
        atoms = _check_atoms(atoms, self.n)
        if self._eps_auto:
            self._eps_auto = False
            self._atoms = atoms.detach()
            with torch.no_grad():
                eps = self.AUTO_EPS_SCALE * median_pairwise_cost(atoms.detach(), self.Q)
                if eps > 0 and math.isfinite(eps):
                    self.log_eps.fill_(math.log(eps))
        if self.learnable_atoms:
            # Learnable atoms are initialised once; later calls leave them to the optimizer.
            if not isinstance(self._atoms, nn.Parameter):
                self._atoms = nn.Parameter(atoms.detach().clone())
            return
        self._atoms = atoms

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Atoms set by meta-training live in the state dict; a fresh potential has none yet.
        key = prefix + "_atoms"
        if key in state_dict:
            self._eps_auto = False  # ε comes with the state dict: do not re-initialise it
            if self._atoms is None:
                # To the module's device, as load_state_dict copies parameters (a GPU checkpoint
                # into a CPU model): kept where they were saved, they would pass no device check.
                saved = state_dict[key].detach().to(self.log_eps.device, copy=True)
                self._atoms = nn.Parameter(saved) if self.learnable_atoms else saved
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def atoms(self) -> torch.Tensor:
        if self._atoms is None:
            raise RuntimeError(
                "WassersteinBregman(atoms='ensemble') has no atoms yet: meta_train sets them, "
                "or call set_atoms(tensor of shape (K, n))"
            )
        return self._atoms

    def log_weights(self) -> torch.Tensor:
        K = self.atoms.shape[0]
        if self._weights is None:
            return self.atoms.new_full((K,), -math.log(K))
        w = torch.as_tensor(self._weights, dtype=self.atoms.dtype, device=self.atoms.device)
        if w.shape != (K,) or not (w > 0).all():
            raise ValueError(f"weights must be {K} positive numbers, got {w.tolist()}")
        return torch.log(w / w.sum())

    def initial_state(self, batch: int, n: int, like: torch.Tensor) -> torch.Tensor:
        """ζ = 0, or ``ζ = ∇ψ*(0)`` with ``zero_start`` (then ``â(0) = 0``)."""
        if not self.zero_start:
            return super().initial_state(batch, n, like)
        return self.conj_grad(like.new_zeros(1, n)).expand(batch, n)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        # The keys Qa_k and offsets are the same at every step of a rollout: build them once.
        self._cache = None
        self._cache = self._keys()
        try:
            yield
        finally:
            self._cache = None

    def barycentre(self) -> torch.Tensor:
        """``ā = Σ_k ν_k a_k``, ``(n,)``."""
        return self.log_weights().exp() @ self.atoms

    def centre_point(self) -> torch.Tensor:
        """Where the attention is centred between the tasks: 0 when centred, else ``ā``. ``(1, n)``."""
        bar = self.barycentre().unsqueeze(0)
        return torch.zeros_like(bar) if self.centre else bar

    def _keys(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``Qa_k`` (K, n), the logit offsets ``−½‖c_k‖²_Q/ε + log ν_k`` (K,) and ``Qā`` (n,) if
        centred (else 0), with ``c_k = a_k − ā`` if centred (else ``a_k``); logits ``aᵀQc_k/ε``."""
        if getattr(self, "_cache", None) is not None:
            return self._cache  # type: ignore[return-value]
        atoms = self.atoms
        keys = atoms * torch.exp(self.Q_log_diag) if self.Q_chol is None else atoms @ self.Q
        log_w = self.log_weights()
        shift = log_w.exp() @ keys if self.centre else keys.new_zeros(keys.shape[-1])
        bar = log_w.exp() @ atoms if self.centre else atoms.new_zeros(atoms.shape[-1])
        offset = -0.5 * ((keys - shift) * (atoms - bar)).sum(-1) / self.eps + log_w
        return keys, offset, shift

    def _logits(self, a: torch.Tensor) -> torch.Tensor:
        keys, offset, shift = self._keys()
        return (a @ keys.T - (a @ shift).unsqueeze(-1)) / self.eps + offset

    def attention(self, a: torch.Tensor) -> torch.Tensor:
        """``π(a)``, ``(B, K)``: rows sum to one."""
        return torch.softmax(self._logits(a), dim=-1)

    def _attention_keys(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.softmax(self._logits(a), dim=-1), self._keys()[0]

    # -- closed forms ---------------------------------------------------------------------------
    def value(self, a: torch.Tensor) -> torch.Tensor:
        lse = torch.logsumexp(self._logits(a), dim=-1)
        linear = a @ self._keys()[2]
        return 0.5 * self.lam * (a * a).sum(-1) + linear + self.eps * lse

    def grad(self, a: torch.Tensor) -> torch.Tensor:
        pi, keys = self._attention_keys(a)
        return self.lam * a + pi @ keys

    def hessian(self, a: torch.Tensor) -> torch.Tensor:
        """``λI + U Uᵀ`` as a dense ``(B, n, n)`` (for tests and analysis; the law uses Woodbury)."""
        U = self._woodbury_factor(a)
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return self.lam * eye + U @ U.transpose(-1, -2)

    def _woodbury_factor(self, a: torch.Tensor) -> torch.Tensor:
        # Q Cov_π Q / ε = U Uᵀ with U = (Qa_k − Σ_j π_j Qa_j) √π_k / √ε, shape (B, n, K).
        # √π from the log-softmax: sqrt's derivative at an underflowed π = 0 would be NaN.
        keys = self._keys()[0]
        log_pi = torch.log_softmax(self._logits(a), dim=-1)
        pi = log_pi.exp()
        centred = keys.unsqueeze(0) - (pi @ keys).unsqueeze(1)
        scale = torch.exp(0.5 * (log_pi - torch.log(self.eps)))
        return (centred * scale.unsqueeze(-1)).transpose(-1, -2)

    def hess_solve(self, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        U = self._woodbury_factor(a)
        lam = self.lam
        K = U.shape[-1]
        small = lam * torch.eye(K, dtype=a.dtype, device=a.device) + U.transpose(-1, -2) @ U
        inner = torch.linalg.solve(small, (U.transpose(-1, -2) @ g.unsqueeze(-1)))
        return (g - (U @ inner).squeeze(-1)) / lam

    def conj_grad(self, z: torch.Tensor, tol: float = 1e-13, max_iter: int = 50) -> torch.Tensor:
        """``∇ψ*(z)``: the ``a`` with ``∇ψ(a) = z``, by Newton's method with backtracking."""
        keys = self._keys()[0]
        a = (z - keys.mean(0)) / self.lam
        for _ in range(max_iter):
            residual = self.grad(a) - z
            if float(residual.detach().abs().max()) < tol * (1.0 + float(z.detach().abs().max())):
                break
            step = self.hess_solve(a, residual)
            # ψ(a) − zᵀa is λ-strongly convex: halve the step until it decreases.
            f0 = self.value(a) - (z * a).sum(-1)
            t = torch.ones_like(f0)
            for _ in range(30):
                trial = a - t.unsqueeze(-1) * step
                worse = self.value(trial) - (z * trial).sum(-1) > f0 + 1e-15 * f0.abs()
                if not worse.any():
                    break
                t = torch.where(worse, 0.5 * t, t)
            a = a - t.unsqueeze(-1) * step
        return a


def median_pairwise_cost(atoms: torch.Tensor, Q: torch.Tensor) -> float:
    """The median over pairs ``i < j`` of the ground cost ``½(a_i − a_j)ᵀQ(a_i − a_j)``; 0 if K = 1."""
    i, j = torch.triu_indices(len(atoms), len(atoms), 1, device=atoms.device)
    if len(i) == 0:
        return 0.0
    diff = atoms[i] - atoms[j]
    # torch.median returns the lower middle value for an even count; quantile interpolates, as numpy.
    return float(torch.quantile(0.5 * ((diff @ Q) * diff).sum(-1), 0.5))


def _check_atoms(atoms: torch.Tensor, n: int | None) -> torch.Tensor:
    if not isinstance(atoms, torch.Tensor):
        atoms = torch.as_tensor(atoms, dtype=torch.get_default_dtype())
    if not atoms.is_floating_point():
        raise ValueError(f"atoms must be a floating-point tensor, got dtype {atoms.dtype}")
    if atoms.dim() != 2 or atoms.shape[0] == 0:
        raise ValueError(f"atoms must have shape (K, n) with K >= 1, got {tuple(atoms.shape)}")
    if n is not None and atoms.shape[1] != n:
        raise ValueError(f"atoms must have shape (K, {n}), got {tuple(atoms.shape)}")
    if not torch.isfinite(atoms).all():
        raise ValueError("atoms contain NaN or infinite values")
    return atoms
