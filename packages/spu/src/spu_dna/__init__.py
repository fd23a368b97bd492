"""spu-dna: the Synergistic Plasticity Unit (SPU) for DNA sequence modelling, as transformers models.

Token-specific convolution (LPL), dual-domain time + FFT mixing (DPL) and dual-axis saliency (SPL):
a reconstruction from the paper's abstract, every concrete choice configurable (see the README).
"""

from importlib.metadata import PackageNotFoundError, version

from spu_dna.configuration import SPUConfig
from spu_dna.modeling import (
    SPUForMaskedLM,
    SPUForSequenceClassification,
    SPUModel,
    SPUPreTrainedModel,
    reverse_complement_ids,
)
from spu_dna.tokenizer import DNATokenizer

try:
    __version__ = version("spu-dna")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "DNATokenizer",
    "SPUConfig",
    "SPUForMaskedLM",
    "SPUForSequenceClassification",
    "SPUModel",
    "SPUPreTrainedModel",
    "__version__",
    "reverse_complement_ids",
]
