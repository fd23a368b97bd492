"""Optimizers built on PRISM: :class:`PrismMuon` and :class:`PrismShampoo`."""

from prism_matfn.optim.muon import PrismMuon
from prism_matfn.optim.shampoo import PrismShampoo

__all__ = ["PrismMuon", "PrismShampoo"]
