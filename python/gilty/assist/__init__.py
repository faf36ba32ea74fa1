"""Answers for a coding assistant: `gilty mcp`, an MCP server over stdio (docs/mcp.md).

``tools`` holds what each tool does, with the command line's options, bounds and JSON and without
the `mcp` package: the options built as the commands build them, the capability's ``run``, the
report registry's JSON. ``mcp_server`` puts those functions behind the `mcp` package's server
(``pip install 'gilty[mcp]'``), and is imported only by ``serve``, which says in one line when the
package is missing. Like ``cli/``, this room sits above the capabilities and ``report/``, and
imports no ``cli/`` module: what it needs from the command line (reading a saved JSON report) its
caller hands it.
"""

from __future__ import annotations

from gilty._errors import EXIT_USAGE, CommandError

# The `mcp` release the server is written against (pyproject.toml's `mcp` extra pins the same).
MCP_PIN = "mcp==2.3.0"
NEEDS_MCP = f"`gilty mcp` needs the mcp package ({MCP_PIN}): pip install 'gilty[mcp]'"

# Top-level modules whose absence means the `mcp` extra is not installed (mcp and what it brings).
_MCP_MODULES = ("mcp", "mcp_types", "pydantic", "pydantic_core", "anyio")


def serve(read_json) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin; ``read_json(path)`` reads a
    saved report (one line, exit 2, when it is unreadable or not JSON)."""
    try:
        from gilty.assist import mcp_server
    except ImportError as e:
        if (e.name or "").split(".")[0] in _MCP_MODULES:
            raise CommandError(NEEDS_MCP, EXIT_USAGE) from None
        raise
    mcp_server.serve(read_json)
