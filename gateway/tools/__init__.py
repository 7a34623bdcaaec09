"""Tool sources for the reference loop: Python functions, MCP servers, and a box that holds them.

``.mcp``, ``.pool`` and ``.sources`` (which need the MCP SDK) are imported on use,
not here, so a process with only function tools does not pay for the SDK.
"""

from .functions import FunctionTools, tool
from .toolbox import ToolBox

__all__ = ["FunctionTools", "ToolBox", "tool"]
