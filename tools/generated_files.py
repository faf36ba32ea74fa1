"""What the two generators (gen_layouts.py, gen_opcodes.py) share: checking their output against the
committed files (`--check`, run by `make test`) or writing it."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path


def check_or_write(outputs: dict, check: bool, tool: str, repo: Path, summary: str) -> int:
    """``outputs`` maps committed paths to freshly generated text. With ``check``: print a diff of each
    stale file and return 1 if any, else print ``summary`` and return 0. Without: write what changed."""
    if check:
        stale = 0
        for path, new in outputs.items():
            old = path.read_text() if path.exists() else ""
            if old != new:
                stale += 1
                rel = path.relative_to(repo)
                sys.stdout.writelines(
                    difflib.unified_diff(
                        old.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        fromfile=f"{rel} (committed)",
                        tofile=f"{rel} (generated)",
                    )
                )
        if stale:
            print(f"{tool}: {stale} file(s) out of date; run python3 tools/{tool}.py", file=sys.stderr)
            return 1
        print(f"{tool}: up to date ({summary})", file=sys.stderr)
        return 0
    for path, new in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != new:
            path.write_text(new)
            print(f"{tool}: wrote {path.relative_to(repo)}", file=sys.stderr)
    return 0
