"""An MCP client of the `mcp` package's own (``stdio_client``, ``ClientSession``) that starts a server,
makes the calls it is given in one session, in order, and prints what came back as JSON. Run by
tests/integration/test_mcp.py under a venv that has the `mcp` package (the test run's own has not).

    python mcp_client.py '{"command": [...], "env": {...}, "calls": [["list_tools"], ["dump", {"pid": 1}]]}'

Prints {"calls": [...]}: for list_tools the tools' names, descriptions, input schemas and
annotations; for a tool call ``is_error`` and the text of each content block.
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def session(plan: dict) -> dict:
    command = plan["command"]
    server = StdioServerParameters(command=command[0], args=command[1:], env=plan.get("env"), cwd=plan.get("cwd"))
    answers = []
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=plan.get("timeout", 120)) as client:
            await client.initialize()
            for name, *arguments in plan["calls"]:
                if name == "list_tools":
                    listed = await client.list_tools()
                    answers.append(
                        {
                            "tools": [
                                {
                                    "name": tool.name,
                                    "description": tool.description,
                                    "input_schema": tool.input_schema,
                                    "read_only": tool.annotations.read_only_hint if tool.annotations else None,
                                }
                                for tool in listed.tools
                            ]
                        }
                    )
                    continue
                result = await client.call_tool(name, arguments[0] if arguments else {})
                texts = [block.text for block in result.content if block.type == "text"]
                answers.append({"tool": name, "is_error": bool(result.is_error), "texts": texts})
    return {"calls": answers}


if __name__ == "__main__":
    print(json.dumps(anyio.run(session, json.loads(sys.argv[1]))))
