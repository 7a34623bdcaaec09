"""loopgate: a protocol gateway for agent loops.

The code lives in three packages installed under this one: ``loopgate.contracts`` (the
vocabulary: LoopEvents, the envelope, the ports), ``loopgate.adapters`` (one package per wire
protocol) and ``loopgate.gateway`` (the hub, the journal, the loops, the server and the CLI).
"""

from importlib.metadata import PackageNotFoundError, version

# The name on PyPI; "loopgate" there belongs to an unrelated project.
DISTRIBUTION = "loopgate-server"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "unknown"

__all__ = ["DISTRIBUTION", "__version__"]
