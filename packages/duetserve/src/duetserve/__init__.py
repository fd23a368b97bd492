"""duetserve: TODO one line on the method."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("duetserve")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
