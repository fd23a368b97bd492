"""shared-core: the thin foundation of the adaptive-methods packages.

Light to import: ``shared_core.kernels``, ``.device``, ``.report``, ``.cli``, ``.bench`` and
``.testing`` need only torch and numpy; ``shared_core.data`` and ``shared_core.models`` bring in
scikit-learn, tokenizers and transformers when used.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("shared-core")  # the one place the version lives is pyproject.toml
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
