"""shared-core: the thin foundation of the adaptive-methods packages.

The base install is numpy alone: ``shared_core.report``, ``.cli``, ``.bench`` and the numpy loaders of
``shared_core.data`` work without torch. ``shared_core.kernels``, ``.device``, ``.testing`` and
``.models`` need the ``torch`` extra (or a package that depends on torch); the report's figures and the
progress bars need ``reproduce``; ``models`` brings transformers and tokenizers.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("shared-core")  # the one place the version lives is pyproject.toml
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
