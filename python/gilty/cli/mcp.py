"""Serve dump, dump_core, record, memory, specialization, compare and a load run's knee to a coding
assistant, over MCP on stdio.

  gilty mcp          # started by the assistant, which talks to it on stdin/stdout

Register it in the assistant's MCP configuration as the command `gilty` with the argument `mcp`,
e.g. {"mcpServers": {"gilty": {"command": "gilty", "args": ["mcp"]}}}; to read other users'
processes the server runs as root, as `gilty` itself would. Tools: dump (every thread now),
dump_core (the same from a core file), record (at most 60 s, at most 1000 Hz), memory (a prefork
tree's sharing and copy-on-write, at most 60 s), specialization (the adaptive interpreter's hot
sites, at most 60 s), compare (two saved JSON reports), load_knee (a saved `gilty load` report's
knee: reads the file, generates no load). Each answers with the JSON the command writes with
--format json, a failure with gilty's one-line error. Needs the mcp package:
pip install 'gilty[mcp]'. See docs/mcp.md.
"""

from __future__ import annotations

import argparse

from gilty import assist
from gilty._errors import EXIT_OK
from gilty.cli.options import read_json_file


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    pass  # no options: what each tool is asked comes with the call


def run(args: argparse.Namespace) -> int:
    assist.serve(read_json_file)
    return EXIT_OK
