"""adas-optim: AdaS, the optimizer that mixes AdamW and momentum SGD per tensor (Zhou et al., ICML 2026).

``AdaS`` is a drop-in for ``torch.optim.AdamW``; ``adas_optim.snn`` has pure-torch spiking-transformer
blocks (LIF neurons, surrogate gradients, Spikformer/QKFormer attention) to train with it.
"""

from importlib.metadata import PackageNotFoundError, version

from adas_optim.mixing import excess_energy, mixing_lambda
from adas_optim.optimizer import AdaS
from adas_optim.scheduler import LinearGammaScheduler

try:
    __version__ = version("adas-optim")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["AdaS", "LinearGammaScheduler", "__version__", "excess_energy", "mixing_lambda"]
