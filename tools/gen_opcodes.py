#!/usr/bin/env python3
"""Generate crates/gilty-layouts/src/generated_opcodes/v3_XX.rs: per-version opcode metadata for
reading adaptive (specialized) bytecode from outside.

For every installed CPython 3.11+ (pyenv installs, Debian sid's 3.14/3.15 from tools/sid_pythons.py, or
explicit --prefix arguments) this takes:

- from the interpreter itself (`python3 -I -c ...`): every opcode name and number (`dis._all_opmap`),
  the specialization families (`opcode._specializations`: base -> specialized names) and the inline
  cache entries per base opcode (`opcode._inline_cache_entries`);
- from its own headers (a C program compiled with -DPy_BUILD_CORE that calls the static inline
  counter functions of Include/internal/pycore_code.h / pycore_backoff.h): the adaptive counter
  layout (backoff bits), the word written at quickening (warm-up), after a successful
  specialization (cooldown), after a first failed attempt, and the largest backoff;
- measured by running the interpreter (specialize.c/ceval.c constants that no header carries):
  the counter word of a freshly specialized monomorphic site and how much one miss subtracts.

    python3 tools/gen_opcodes.py            # regenerate the committed files
    python3 tools/gen_opcodes.py --check    # exit 1 with a diff if the committed files are stale

Versions that are not installed are skipped and their committed files left alone. Deterministic.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from generated_files import check_or_write

REPO = Path(__file__).resolve().parent.parent
GEN_DIR = REPO / "crates" / "gilty-layouts" / "src" / "generated_opcodes"
SUPPORTED = [(3, 11), (3, 12), (3, 13), (3, 14), (3, 15)]
# 3.10 has no specializing interpreter but the opcache of bpo-42093/bpo-26219: its table is the opcache
# layout (Include/cpython/code.h, Include/internal/pycore_code.h) and the opcodes that use it.
OPCACHE_VERSIONS = [(3, 10)]

OPCACHE_PROBE = """
    printf("code_opcache_map %zu\\n", offsetof(PyCodeObject, co_opcache_map));
    printf("code_opcache %zu\\n", offsetof(PyCodeObject, co_opcache));
    printf("code_opcache_flag %zu\\n", offsetof(PyCodeObject, co_opcache_flag));
    printf("code_opcache_size %zu\\n", offsetof(PyCodeObject, co_opcache_size));
    printf("entry_size %zu\\n", sizeof(struct _PyOpcache));
    printf("entry_optimized %zu\\n", offsetof(struct _PyOpcache, optimized));
"""

OPCACHE_OPS_SNIPPET = (
    "import dis, json; print(json.dumps({n: dis.opmap[n] for n in ('LOAD_GLOBAL', 'LOAD_ATTR', 'LOAD_METHOD', 'EXTENDED_ARG')}))"
)

# Discovery (pyenv / --prefix) is shared with the layout generator.
_spec = importlib.util.spec_from_file_location("gen_layouts", Path(__file__).with_name("gen_layouts.py"))
gen_layouts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_layouts)  # type: ignore[union-attr]

# Runs inside the target interpreter: metadata (with BINARY_OP's operator symbols by oparg, `opcode._nb_ops`),
# plus two measured counter facts.
METADATA_SNIPPET = r"""
import dis, json, opcode
ops = dict(dis._all_opmap)
ice = opcode._inline_cache_entries
if hasattr(ice, "items"):           # 3.13+: by name (3.15: a frozendict)
    caches = {n: int(c) for n, c in ice.items()}
else:                                 # 3.11, 3.12: a list indexed by base opcode
    caches = {opcode.opname[i]: int(c) for i, c in enumerate(ice) if c}
fams = {b: list(s) for b, s in opcode._specializations.items()}

class A:
    def __init__(self): self.x = 1
class B:
    def __init__(self): self.y = 0; self.x = 2
def site(o):
    return o.x
def word():
    for ins in dis.get_instructions(site, adaptive=True):
        if ins.opname.startswith("LOAD_ATTR"):
            raw = site.__code__._co_code_adaptive
            return ins.opname, int.from_bytes(raw[ins.offset + 2:ins.offset + 4], "little")
a, b = A(), B()
for _ in range(20):
    site(a)
name, fresh = word()
site(b)
_, after_miss = word()
nb_ops = [sym for _, sym in opcode._nb_ops]
print(json.dumps({"nb_ops": nb_ops, "ops": ops, "caches": caches, "families": fams, "specialized_name": name,
                  "fresh_specialized_word": fresh, "miss_step": fresh - after_miss}))
"""

COUNTER_PROBE = {
    (3, 11): """
    printf("backoff_bits %d\\n", ADAPTIVE_BACKOFF_BITS);
    printf("max_backoff %d\\n", MAX_BACKOFF_VALUE);
    printf("quickening_warmup_delay %d\\n", QUICKENING_WARMUP_DELAY);
    printf("value_shift %d\\n", ADAPTIVE_BACKOFF_BITS);
    printf("adaptive_start %u\\n", (unsigned)adaptive_counter_start());
    printf("first_backoff %u\\n", (unsigned)adaptive_counter_backoff(adaptive_counter_start()));
""",
    (3, 12): """
    printf("backoff_bits %d\\n", ADAPTIVE_BACKOFF_BITS);
    printf("max_backoff %d\\n", MAX_BACKOFF_VALUE);
    printf("value_shift %d\\n", ADAPTIVE_BACKOFF_BITS);
    printf("warmup %u\\n", (unsigned)adaptive_counter_warmup());
    printf("cooldown %u\\n", (unsigned)adaptive_counter_cooldown());
    printf("first_backoff %u\\n", (unsigned)adaptive_counter_backoff(adaptive_counter_warmup()));
""",
    (3, 13): """
    /* _Py_BackoffCounter is a bitfield union: read the bit layout back through as_counter. */
    unsigned one = make_backoff_counter(1, 0).as_counter;
    int shift = 0; while ((1u << shift) != one) shift++;
    printf("backoff_bits %d\\n", shift);
    printf("value_shift %d\\n", shift);
    printf("max_backoff %d\\n", (int)restart_backoff_counter(make_backoff_counter(0, 15 - 1)).backoff);
    printf("warmup %u\\n", (unsigned)adaptive_counter_warmup().as_counter);
    printf("cooldown %u\\n", (unsigned)adaptive_counter_cooldown().as_counter);
    printf("first_backoff %u\\n", (unsigned)adaptive_counter_backoff(adaptive_counter_warmup()).as_counter);
    printf("unreachable %u\\n", (unsigned)UNREACHABLE_BACKOFF);
""",
    # 3.14 made the counter a plain uint16_t (value << BACKOFF_BITS | backoff); 3.15 narrowed the backoff
    # to 3 bits and restarts from a table of values rather than 2^backoff - 1.
    (3, 14): """
    unsigned one = make_backoff_counter(1, 0).value_and_backoff;
    int shift = 0; while ((1u << shift) != one) shift++;
    printf("backoff_bits %d\\n", shift);
    printf("value_shift %d\\n", shift);
    printf("max_backoff %d\\n", (int)(restart_backoff_counter(make_backoff_counter(0, UNREACHABLE_BACKOFF - 1)).value_and_backoff & (one - 1)));
    printf("warmup %u\\n", (unsigned)adaptive_counter_warmup().value_and_backoff);
    printf("cooldown %u\\n", (unsigned)adaptive_counter_cooldown().value_and_backoff);
    printf("first_backoff %u\\n", (unsigned)adaptive_counter_backoff(adaptive_counter_warmup()).value_and_backoff);
    printf("unreachable %u\\n", (unsigned)initial_unreachable_backoff_counter().value_and_backoff);
""",
}
COUNTER_PROBE[(3, 15)] = COUNTER_PROBE[(3, 14)]

C_TEMPLATE = """\
/* Generated by tools/gen_opcodes.py for CPython {major}.{minor}; compiled and run, never committed. */
#define Py_BUILD_CORE 1
#include <stddef.h>
#include <stdio.h>
#include "Python.h"
#include "internal/pycore_code.h"
int main(void) {{
{body}
    return 0;
}}
"""


def die(msg: str) -> NoReturn:
    print(f"gen_opcodes: error: {msg}", file=sys.stderr)
    sys.exit(2)


# The interpreter of an install and the flags that compile against its internal headers (the build's own
# -D_Py_* included): the layout generator's, so both generators read an install the same way.
python_exe = gen_layouts.python_exe
include_flags = gen_layouts.include_flags


def counter_constants(ver: tuple[int, int], prefix: Path, body: str = "") -> dict[str, int]:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        die(f"C compiler {cc!r} not found")
    with tempfile.TemporaryDirectory(prefix="gilty-opcodes-") as tmp:
        src = Path(tmp) / "probe.c"
        exe = Path(tmp) / "probe"
        src.write_text(C_TEMPLATE.format(major=ver[0], minor=ver[1], body=body or COUNTER_PROBE[ver]))
        cmd = [cc, *include_flags(prefix, ver), "-o", str(exe), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"compiling the {ver[0]}.{ver[1]} counter probe failed:\n$ {' '.join(cmd)}\n{r.stderr}")
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def metadata(prefix: Path, ver: tuple[int, int]) -> dict:
    exe = python_exe(prefix, ver)
    r = subprocess.run([str(exe), "-I", "-c", METADATA_SNIPPET], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"reading opcode metadata with {exe} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def render(ver: tuple[int, int], prefix: Path, meta: dict, consts: dict[str, int], version: str) -> str:
    ops: dict[str, int] = meta["ops"]
    names = [""] * 256
    for name, num in ops.items():
        if num >= 256:
            continue  # 3.12+ pseudo-instructions (SETUP_FINALLY, ...) exist only in the compiler
        names[num] = name
    deopt = list(range(256))
    family = [False] * 256
    caches = [0] * 256
    for base, specs in meta["families"].items():
        n_caches = meta["caches"].get(base, 0)
        b = ops[base]
        # A family with a counter has inline caches; 3.12's LOAD_FAST "family" (superinstructions)
        # and 3.11/3.13's RESUME/JUMP_BACKWARD quickened forms have none and are not sites.
        # 3.14+: JUMP_BACKWARD (and 3.15's RESUME) count down to the JIT's tier-2 trace, not to a
        # specialization: their forms (*_JIT, *_NO_JIT) follow the build and never miss.
        family[b] = n_caches > 0 and not any(s.endswith("_JIT") for s in specs)
        for s in specs:
            deopt[ops[s]] = b
    for name, n in meta["caches"].items():
        caches[ops[name]] = n
    for op in range(256):
        caches[op] = caches[deopt[op]]
    # 3.11 keeps a separate *_ADAPTIVE opcode per family; 3.12+ counts down in the base opcode.
    adaptive = [names[op].endswith("_ADAPTIVE") and family[deopt[op]] for op in range(256)]

    step = meta["miss_step"]
    if step <= 0 or step & (step - 1):
        die(f"{prefix}: one miss changed the counter by {step}; expected a power of two")
    specialized_shift = step.bit_length() - 1
    fresh = meta["fresh_specialized_word"]
    if not meta["specialized_name"].startswith("LOAD_ATTR_"):
        die(f"{prefix}: a monomorphic o.x site became {meta['specialized_name']}, not a LOAD_ATTR_* form")

    def arr(values: list, fmt=str) -> str:
        rows = []
        for i in range(0, 256, 16):
            rows.append("        " + " ".join(fmt(v) + "," for v in values[i : i + 16]))
        return "[\n" + "\n".join(rows) + "\n    ]"

    def opt(key: str) -> str:
        return f"Some({consts[key]})" if key in consts else "None"

    lines = [
        f"// Generated by tools/gen_opcodes.py from CPython {version} ({prefix}). Do not edit.",
        "",
        "use crate::opcodes::{CounterRules, OpcodeTable};",
        "",
        "pub const OPCODES: OpcodeTable = OpcodeTable {",
        f"    version: ({ver[0]}, {ver[1]}),",
        f"    extended_arg: {ops['EXTENDED_ARG']},",
        f"    names: {arr(names, lambda s: json.dumps(s))},",
        f"    deopt: {arr(deopt)},",
        f"    caches: {arr(caches)},",
        f"    family: {arr(family, lambda b: 'true' if b else 'false')},",
        f"    adaptive: {arr(adaptive, lambda b: 'true' if b else 'false')},",
        f"    binary_ops: &[{', '.join(json.dumps(x) for x in meta['nb_ops'])}],",
        "    counter: CounterRules {",
        f"        value_shift: {consts['value_shift']},",
        f"        max_backoff: {consts['max_backoff']},",
        f"        warmup: {opt('warmup')},",
        f"        quickening_warmup_delay: {opt('quickening_warmup_delay')},",
        f"        adaptive_start: {opt('adaptive_start')},",
        f"        first_backoff: {consts['first_backoff']},",
        f"        specialized_start: {fresh},",
        f"        specialized_shift: {specialized_shift},",
        f"        unreachable: {opt('unreachable')},",
        "    },",
        "};",
    ]
    return "\n".join(lines) + "\n"


def render_opcache(ver: tuple[int, int], prefix: Path, consts: dict[str, int], ops: dict[str, int], version: str) -> str:
    fields = ["code_opcache_map", "code_opcache", "code_opcache_flag", "code_opcache_size", "entry_size", "entry_optimized"]
    lines = [
        f"// Generated by tools/gen_opcodes.py from CPython {version} ({prefix}). Do not edit.",
        "",
        "use crate::opcodes::OpcacheLayout;",
        "",
        "pub const OPCACHE: OpcacheLayout = OpcacheLayout {",
        f"    version: ({ver[0]}, {ver[1]}),",
        *[f"    {f}: {consts[f]}," for f in fields],
        f"    load_global: {ops['LOAD_GLOBAL']},",
        f"    load_attr: {ops['LOAD_ATTR']},",
        f"    load_method: {ops['LOAD_METHOD']},",
        f"    extended_arg: {ops['EXTENDED_ARG']},",
        "};",
    ]
    return "\n".join(lines) + "\n"


def render_mod() -> str:
    lines = ["// Generated by tools/gen_opcodes.py. Do not edit.", ""]
    lines += [f"pub mod v{a}_{b};" for a, b in OPCACHE_VERSIONS + SUPPORTED]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 if they differ")
    ap.add_argument("--prefix", action="append", default=[], help="a CPython install prefix (repeatable)")
    args = ap.parse_args()
    installs = gen_layouts.discover(args.prefix)
    outputs: dict[Path, str] = {GEN_DIR / "mod.rs": render_mod()}
    skipped = []
    for ver in SUPPORTED:
        prefix = installs.get(ver)
        if prefix is None:
            skipped.append(ver)
            continue
        meta = metadata(prefix, ver)
        consts = counter_constants(ver, prefix)
        version = subprocess.run(
            [str(python_exe(prefix, ver)), "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        outputs[GEN_DIR / f"v{ver[0]}_{ver[1]}.rs"] = render(ver, prefix, meta, consts, version)
        print(f"gen_opcodes: {ver[0]}.{ver[1]}: CPython {version} at {prefix}", file=sys.stderr)
    for ver in OPCACHE_VERSIONS:
        prefix = installs.get(ver)
        if prefix is None:
            skipped.append(ver)
            continue
        exe = str(prefix / "bin" / "python3")
        ops = json.loads(
            subprocess.run([exe, "-I", "-c", OPCACHE_OPS_SNIPPET], capture_output=True, text=True, check=True).stdout
        )
        version = subprocess.run(
            [exe, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True, check=True
        ).stdout.strip()
        consts = counter_constants(ver, prefix, OPCACHE_PROBE)
        outputs[GEN_DIR / f"v{ver[0]}_{ver[1]}.rs"] = render_opcache(ver, prefix, consts, ops, version)
        print(f"gen_opcodes: {ver[0]}.{ver[1]} (opcache): CPython {version} at {prefix}", file=sys.stderr)
    for ver in skipped:
        path = GEN_DIR / f"v{ver[0]}_{ver[1]}.rs"
        note = "committed file left unchanged" if path.exists() else "NO committed file: the crate will not build"
        if ver in [(3, 14), (3, 15)]:
            note += "; Debian sid's build comes from `make sid-pythons`"
        print(f"gen_opcodes: skipped {ver[0]}.{ver[1]} (not installed; {note})", file=sys.stderr)
    return check_or_write(
        outputs,
        args.check,
        "gen_opcodes",
        REPO,
        f"{len(SUPPORTED) + len(OPCACHE_VERSIONS) - len(skipped)} checked, {len(skipped)} skipped",
    )


if __name__ == "__main__":
    sys.exit(main())
