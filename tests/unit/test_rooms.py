"""The rooms' import directions (docs/architecture.md, crates/README.md) hold as the code grows: the
report layer never reaches up into the command line, capabilities use neither, and no two Rust
modules of a crate import each other."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "gilty"
CAPABILITIES = ("sampling", "memory", "load", "specialization", "observe")


def imported_modules(source: str, module: str, is_package: bool = False) -> set:
    """Absolute names of what the code of ``module`` imports (relative imports resolved; for
    ``from a import b`` both ``a`` and ``a.b``, since ``b`` may be a submodule)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                found = ".".join(base + ([node.module] if node.module else []))
            else:
                found = node.module or ""
            names.add(found)
            names.update(f"{found}.{a.name}" for a in node.names)
    return names


def file_imports(path: Path) -> set:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        return imported_modules(path.read_text(), ".".join(parts[:-1]), is_package=True)
    return imported_modules(path.read_text(), ".".join(parts))


def reaching(room: str, forbidden: tuple) -> list:
    found = []
    for path in sorted((PACKAGE / room).rglob("*.py")):
        bad = sorted(m for m in file_imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        if bad:
            found.append(f"{path.relative_to(REPO)}: {', '.join(bad)}")
    return found


def test_imports_resolve_to_absolute_names():
    # The checks below are only as good as this resolution (import inside functions included).
    code = "from ..cli import record\nfrom . import labels\ndef f():\n    import gilty.cli.options\n"
    found = imported_modules(code, "gilty.report.dump")
    assert {"gilty.cli", "gilty.cli.record", "gilty.report.labels", "gilty.cli.options"} <= found
    assert "gilty.sampling" in imported_modules("from .. import sampling", "gilty.report", is_package=True)


def test_the_report_layer_imports_no_command_line_module():
    assert reaching("report", ("gilty.cli",)) == []


def test_the_assistant_server_imports_no_command_line_module():
    # `gilty mcp`'s server (assist/) stands beside cli/, over the capabilities and report/: what it
    # needs of the command line (its reader of saved reports) the command hands it.
    assert reaching("assist", ("gilty.cli",)) == []


@pytest.mark.parametrize("room", CAPABILITIES)
def test_a_capability_imports_neither_the_command_line_nor_the_report_layer(room):
    assert reaching(room, ("gilty.cli",)) == []


# What a test or a benchmark may take from the command line: the program itself (`main`, as the
# console script runs it) and its parse step (`parse_options`: the typed options a command line
# gives), never a command's parts. `from gilty.cli import main` names the package too.
CLI_ENTRY = ("gilty.cli", "gilty.cli.main", "gilty.cli.parse_options")


def _handed_code(node: ast.AST):
    """The text of a string that may be Python for a child interpreter (`python -c`): a constant, or an
    f-string with each of its values written as a name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "_" for v in node.values)
    return None


def code_imports(source: str) -> set:
    """What code imports, with what the Python it hands to a child interpreter imports, and the
    ``gilty.cli.<name>`` attributes it reaches through ``import gilty.cli``."""
    names = imported_modules(source, "tests.code")
    for node in ast.walk(ast.parse(source)):
        text = _handed_code(node)
        if text is not None and "import" in text:
            try:
                names |= imported_modules(text, "tests.code")
            except SyntaxError:  # prose, not code
                pass
        elif isinstance(node, ast.Attribute):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name):
                names.add(".".join([inner.id, *reversed(chain)]))
    return names


def command_line_parts(names: set) -> list:
    return sorted(m for m in names if m.startswith("gilty.cli.") and m not in CLI_ENTRY)


def command_line_users(*rooms: str) -> list:
    found = []
    for room in rooms:
        for path in sorted((REPO / room).rglob("*.py")):
            if path == Path(__file__):  # its examples are strings of code on purpose
                continue
            bad = command_line_parts(code_imports(path.read_text()))
            if bad:
                found.append(f"{path.relative_to(REPO)}: {', '.join(bad)}")
    return found


def test_command_line_parts_are_found_in_code_and_in_code_handed_to_a_child():
    code = (
        "from gilty.cli import main\n"
        "import gilty.cli\n"
        "gilty.cli.main([])\n"
        "pid = 1\n"
        "run = f'import gilty.cli.memory; from gilty.cli import main; main([{pid}])'\n"
        "def f():\n"
        "    return gilty.cli.options.output_format\n"
    )
    assert command_line_parts(code_imports(code)) == ["gilty.cli.memory", "gilty.cli.options", "gilty.cli.options.output_format"]
    assert command_line_parts(code_imports("from gilty.cli import main as gilty_main\nimport gilty.cli\n")) == []


def test_no_test_or_benchmark_imports_a_command_line_module():
    # Tests and benchmarks reach a capability through its own package and a format through report/;
    # the CLI they run whole (`gilty.cli.main` or the `gilty` program), so a command's module can
    # change shape without breaking them.
    offenders = command_line_users("tests", "bench")
    assert offenders == [], "CLI modules imported, other than the entry point:\n" + "\n".join(offenders)


# -- Rust ----------------------------------------------------------------------------------------

CRATES = sorted(p for p in (REPO / "crates").iterdir() if (p / "src").is_dir())
_SEGMENT = re.compile(r"[a-z_][a-z0-9_]*")


def module_of(src: Path, path: Path) -> tuple:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def _expand(tree: str) -> list:
    """`a::{b, c::d}` -> [a::b, a::c::d] for a use tree's text."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, body = tree[:brace], tree[brace + 1 : tree.rindex("}")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return [p for item in items if item.strip() for p in _expand(prefix + item.strip())]


def referenced_paths(text: str, here: tuple) -> list:
    """Crate-relative module paths a Rust file names: `use crate::..`, `use super::..` and inline
    `crate::a::b` paths."""
    text = re.sub(r"//[^\n]*", "", text)
    out = []
    for tree in re.findall(r"\buse\s+((?:crate|super)::[^;]*);", text):
        for path in _expand(tree):
            segs = [s.strip() for s in path.split("::")]
            base = list(here)
            if segs[0] == "super":
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
            else:
                base, segs = [], segs[1:]
            out.append(tuple(base) + tuple(s.split(" as ")[0] for s in segs))
    for path in re.findall(r"\bcrate((?:::[a-z_][a-z0-9_]*)+)", text):
        out.append(tuple(path.strip(":").split("::")))
    return out


def module_graph(crate: Path) -> dict:
    src = crate / "src"
    files = {module_of(src, p): p for p in src.rglob("*.rs")}
    edges = {}
    for here, path in files.items():
        targets = set()
        for ref in referenced_paths(path.read_text(), here):
            # The longest prefix that is a module of the crate.
            for n in range(len(ref), 0, -1):
                if ref[:n] in files:
                    targets.add(ref[:n])
                    break
        edges[here] = {t for t in targets if t != here}
    return edges


def related(a: tuple, b: tuple) -> bool:
    """A module and its own submodule (a parent declares and re-exports its children)."""
    return a[: len(b)] == b or b[: len(a)] == a


def test_module_paths_resolve():
    edges = module_graph(REPO / "crates" / "gilty-core")
    sampler = edges[("sampling", "sampler")]
    assert ("clock",) in sampler and ("sampling", "classify") in sampler


@pytest.mark.parametrize("crate", CRATES, ids=lambda p: p.name)
def test_no_two_rust_modules_import_each_other(crate):
    edges = module_graph(crate)
    mutual = sorted(
        {
            tuple(sorted(("::".join(a), "::".join(b))))
            for a, targets in edges.items()
            for b in targets
            if a in edges.get(b, ()) and not related(a, b)
        }
    )
    assert mutual == [], f"{crate.name}: modules importing each other: {mutual}"
