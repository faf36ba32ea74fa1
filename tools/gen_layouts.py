#!/usr/bin/env python3
"""Generate crates/gilty-layouts/src/generated/v3_XX.rs from installed CPython headers.

For every supported minor version that is installed (pyenv installs, or explicit --prefix
arguments), this writes a small C program that includes the interpreter's own internal headers
(-DPy_BUILD_CORE), prints offsetof()/sizeof() for every field of `Layout`
(crates/gilty-layouts/src/layout.rs), compiles it with gcc, runs it and renders the values as a
Rust `pub const LAYOUT: Layout = Layout { ... };` literal.

    python3 tools/gen_layouts.py            # regenerate the committed files
    python3 tools/gen_layouts.py --check    # exit 1 with a diff if the committed files are stale
    python3 tools/gen_layouts.py --prefix /opt/python3.12 --check

Versions that are not installed are skipped (and reported); their committed files are left as
they are. Output is deterministic: running the generator twice gives byte-identical files.

The field list below must name exactly the fields of `Layout`; the generator parses layout.rs
and refuses to run if the two disagree, so adding a field to `Layout` means adding its C
expression here. Fields declared `Option<u64>` that have no expression for a version are `None`;
plain `u64` fields must have an expression for every version.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import asyncio_layouts
from generated_files import check_or_write

REPO = Path(__file__).resolve().parent.parent
CRATE = REPO / "crates" / "gilty-layouts"
LAYOUT_RS = CRATE / "src" / "layout.rs"
GEN_DIR = CRATE / "src" / "generated"
ASYNC_RS = CRATE / "src" / "asyncio_layout.rs"
ASYNC_DIR = CRATE / "src" / "generated_asyncio"

SUPPORTED = [(3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15)]
# Versions with an asyncio table (tools/asyncio_layouts.py): 3.14 rewrote _asyncio's task bookkeeping.
ASYNC_VERSIONS = [(3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15)]

# ---------------------------------------------------------------------------------------------
# Field table: Layout field -> {version selector: C expression}.
# Selectors: "*" (every version), "3.11" (one version), "3.11+" (that and later),
# "3.10-3.11" (inclusive range). The first matching selector wins.
# ---------------------------------------------------------------------------------------------

FIELDS: list[tuple[str, dict[str, str]]] = [
    # _PyRuntimeState
    ("runtime_size", {"*": "sizeof(_PyRuntimeState)"}),
    ("runtime_interpreters_head", {"*": "offsetof(_PyRuntimeState, interpreters.head)"}),
    ("runtime_interpreters_main", {"*": "offsetof(_PyRuntimeState, interpreters.main)"}),
    ("runtime_gil", {"3.10-3.11": "offsetof(_PyRuntimeState, ceval.gil)"}),
    # PyInterpreterState
    ("interp_next", {"*": "offsetof(PyInterpreterState, next)"}),
    ("interp_id", {"*": "offsetof(PyInterpreterState, id)"}),
    (
        "interp_threads_head",
        {
            "3.10": "offsetof(PyInterpreterState, tstate_head)",
            "3.11+": "offsetof(PyInterpreterState, threads.head)",
        },
    ),
    ("interp_gil_ptr", {"3.12+": "offsetof(PyInterpreterState, ceval.gil)"}),
    ("interp_gc", {"*": "offsetof(PyInterpreterState, gc)"}),
    (
        "interp_modules",
        {
            "3.10-3.11": "offsetof(PyInterpreterState, modules)",
            "3.12+": "offsetof(PyInterpreterState, imports.modules)",
        },
    ),
    # struct _gc_runtime_state / struct gc_generation
    ("gc_enabled", {"*": "offsetof(struct _gc_runtime_state, enabled)"}),
    ("gc_collecting", {"*": "offsetof(struct _gc_runtime_state, collecting)"}),
    ("gc_generations", {"*": "offsetof(struct _gc_runtime_state, generations)"}),
    ("gc_generation_size", {"*": "sizeof(struct gc_generation)"}),
    ("gc_generation_threshold", {"*": "offsetof(struct gc_generation, threshold)"}),
    ("gc_generation_count", {"*": "offsetof(struct gc_generation, count)"}),
    ("gc_permanent_generation", {"*": "offsetof(struct _gc_runtime_state, permanent_generation)"}),
    # struct _gil_runtime_state (internal/pycore_gil.h; FORCE_SWITCHING is defined there)
    ("gil_size", {"*": "sizeof(struct _gil_runtime_state)"}),
    ("gil_interval", {"*": "offsetof(struct _gil_runtime_state, interval)"}),
    ("gil_last_holder", {"*": "offsetof(struct _gil_runtime_state, last_holder)"}),
    ("gil_locked", {"*": "offsetof(struct _gil_runtime_state, locked)"}),
    ("gil_switch_number", {"*": "offsetof(struct _gil_runtime_state, switch_number)"}),
    ("gil_cond", {"*": "offsetof(struct _gil_runtime_state, cond)"}),
    ("gil_mutex", {"*": "offsetof(struct _gil_runtime_state, mutex)"}),
    ("gil_switch_cond", {"*": "offsetof(struct _gil_runtime_state, switch_cond)"}),
    ("gil_switch_mutex", {"*": "offsetof(struct _gil_runtime_state, switch_mutex)"}),
    # PyThreadState
    ("tstate_size", {"*": "sizeof(PyThreadState)"}),
    ("tstate_prev", {"*": "offsetof(PyThreadState, prev)"}),
    ("tstate_next", {"*": "offsetof(PyThreadState, next)"}),
    ("tstate_interp", {"*": "offsetof(PyThreadState, interp)"}),
    ("tstate_frame", {"3.10": "offsetof(PyThreadState, frame)"}),
    ("tstate_cframe", {"3.11-3.12": "offsetof(PyThreadState, cframe)"}),
    ("cframe_current_frame", {"3.11-3.12": "offsetof(_PyCFrame, current_frame)"}),
    ("tstate_current_frame", {"3.13+": "offsetof(PyThreadState, current_frame)"}),
    ("tstate_recursion_depth", {"3.10": "offsetof(PyThreadState, recursion_depth)"}),
    ("tstate_thread_id", {"*": "offsetof(PyThreadState, thread_id)"}),
    ("tstate_native_thread_id", {"3.11+": "offsetof(PyThreadState, native_thread_id)"}),
    ("tstate_state", {"3.13+": "offsetof(PyThreadState, state)"}),
    ("tstate_datastack_chunk", {"3.11+": "offsetof(PyThreadState, datastack_chunk)"}),
    ("tstate_datastack_top", {"3.11+": "offsetof(PyThreadState, datastack_top)"}),
    # _PyStackChunk
    ("stackchunk_previous", {"3.11+": "offsetof(_PyStackChunk, previous)"}),
    ("stackchunk_size", {"3.11+": "offsetof(_PyStackChunk, size)"}),
    # PyFrameObject (3.10) / _PyInterpreterFrame (3.11+)
    (
        "frame_code",
        {
            "3.10": "offsetof(PyFrameObject, f_code)",
            "3.11-3.12": "offsetof(_PyInterpreterFrame, f_code)",
            "3.13+": "offsetof(_PyInterpreterFrame, f_executable)",
        },
    ),
    (
        "frame_previous",
        {
            "3.10": "offsetof(PyFrameObject, f_back)",
            "3.11+": "offsetof(_PyInterpreterFrame, previous)",
        },
    ),
    (
        "frame_instr",
        {
            "3.10": "offsetof(PyFrameObject, f_lasti)",
            "3.11-3.12": "offsetof(_PyInterpreterFrame, prev_instr)",
            "3.13+": "offsetof(_PyInterpreterFrame, instr_ptr)",
        },
    ),
    ("frame_owner", {"3.11+": "offsetof(_PyInterpreterFrame, owner)"}),
    ("frame_state", {"3.10": "offsetof(PyFrameObject, f_state)"}),
    ("frame_is_entry", {"3.11": "offsetof(_PyInterpreterFrame, is_entry)"}),
    (
        "frame_localsplus",
        {
            "3.10": "offsetof(PyFrameObject, f_localsplus)",
            "3.11+": "offsetof(_PyInterpreterFrame, localsplus)",
        },
    ),
    # PyCodeObject
    ("code_filename", {"*": "offsetof(PyCodeObject, co_filename)"}),
    ("code_name", {"*": "offsetof(PyCodeObject, co_name)"}),
    ("code_qualname", {"3.11+": "offsetof(PyCodeObject, co_qualname)"}),
    ("code_varnames", {"3.10": "offsetof(PyCodeObject, co_varnames)"}),
    ("code_argcount", {"*": "offsetof(PyCodeObject, co_argcount)"}),
    ("code_firstlineno", {"*": "offsetof(PyCodeObject, co_firstlineno)"}),
    ("code_linetable", {"*": "offsetof(PyCodeObject, co_linetable)"}),
    ("code_code", {"3.10": "offsetof(PyCodeObject, co_code)"}),
    ("code_code_adaptive", {"3.11+": "offsetof(PyCodeObject, co_code_adaptive)"}),
    ("code_version", {"3.12+": "offsetof(PyCodeObject, co_version)"}),
    # objects
    ("object_type", {"*": "offsetof(PyObject, ob_type)"}),
    ("varobject_size", {"*": "offsetof(PyVarObject, ob_size)"}),
    ("type_name", {"*": "offsetof(PyTypeObject, tp_name)"}),
    ("type_flags", {"*": "offsetof(PyTypeObject, tp_flags)"}),
    ("type_basicsize", {"*": "offsetof(PyTypeObject, tp_basicsize)"}),
    ("type_dictoffset", {"*": "offsetof(PyTypeObject, tp_dictoffset)"}),
    ("heaptype_cached_keys", {"*": "offsetof(PyHeapTypeObject, ht_cached_keys)"}),
    ("unicode_length", {"*": "offsetof(PyASCIIObject, length)"}),
    ("unicode_state", {"*": "offsetof(PyASCIIObject, state)"}),
    ("unicode_ascii_size", {"*": "sizeof(PyASCIIObject)"}),
    ("unicode_compact_size", {"*": "sizeof(PyCompactUnicodeObject)"}),
    ("bytes_sval", {"*": "offsetof(PyBytesObject, ob_sval)"}),
    ("tuple_item", {"*": "offsetof(PyTupleObject, ob_item)"}),
    (
        "long_size",
        {
            "3.10-3.11": "offsetof(PyVarObject, ob_size)",
            "3.12+": "offsetof(PyLongObject, long_value.lv_tag)",
        },
    ),
    (
        "long_digit",
        {
            "3.10-3.11": "offsetof(PyLongObject, ob_digit)",
            "3.12+": "offsetof(PyLongObject, long_value.ob_digit)",
        },
    ),
    ("dict_used", {"*": "offsetof(PyDictObject, ma_used)"}),
    ("dict_keys", {"*": "offsetof(PyDictObject, ma_keys)"}),
    ("dict_values", {"*": "offsetof(PyDictObject, ma_values)"}),
    (
        "dictkeys_size",
        {
            "3.10": "offsetof(struct _dictkeysobject, dk_size)",
            "3.11+": "offsetof(struct _dictkeysobject, dk_log2_size)",
        },
    ),
    ("dictkeys_kind", {"3.11+": "offsetof(struct _dictkeysobject, dk_kind)"}),
    ("dictkeys_log2_index_bytes", {"3.11+": "offsetof(struct _dictkeysobject, dk_log2_index_bytes)"}),
    ("dictkeys_nentries", {"*": "offsetof(struct _dictkeysobject, dk_nentries)"}),
    ("dictkeys_indices", {"*": "offsetof(struct _dictkeysobject, dk_indices)"}),
    ("module_dict", {"*": "offsetof(PyModuleObject, md_dict)"}),
]

# `gilty dump --locals`: a frame's variable names and slots, and the builtin objects it shows by
# value. Kept in its own block so that other additions merge cleanly.
FIELDS += [
    ("code_nlocalsplus", {"3.11+": "offsetof(PyCodeObject, co_nlocalsplus)"}),
    ("code_localsplusnames", {"3.11+": "offsetof(PyCodeObject, co_localsplusnames)"}),
    ("code_localspluskinds", {"3.11+": "offsetof(PyCodeObject, co_localspluskinds)"}),
    ("code_nlocals", {"*": "offsetof(PyCodeObject, co_nlocals)"}),
    ("code_kwonlyargcount", {"*": "offsetof(PyCodeObject, co_kwonlyargcount)"}),
    ("code_flags", {"*": "offsetof(PyCodeObject, co_flags)"}),
    ("code_cellvars", {"3.10": "offsetof(PyCodeObject, co_cellvars)"}),
    ("code_freevars", {"3.10": "offsetof(PyCodeObject, co_freevars)"}),
    ("float_value", {"*": "offsetof(PyFloatObject, ob_fval)"}),
    ("list_items", {"*": "offsetof(PyListObject, ob_item)"}),
    ("set_used", {"*": "offsetof(PySetObject, used)"}),
    ("set_mask", {"*": "offsetof(PySetObject, mask)"}),
    ("set_table", {"*": "offsetof(PySetObject, table)"}),
    ("setentry_size", {"*": "sizeof(setentry)"}),
    ("setentry_key", {"*": "offsetof(setentry, key)"}),
    ("cell_ref", {"*": "offsetof(PyCellObject, ob_ref)"}),
]

# Handling an exception (`dump`'s per-thread flag): the thread state's exception-info stack, which
# `sys.exc_info()` reads. Its own block, for easy merges.
FIELDS += [
    ("tstate_exc_info", {"*": "offsetof(PyThreadState, exc_info)"}),
    (
        "err_stackitem_exc",
        {
            "3.10": "offsetof(_PyErr_StackItem, exc_type)",
            "3.11+": "offsetof(_PyErr_StackItem, exc_value)",
        },
    ),
    ("err_stackitem_previous", {"*": "offsetof(_PyErr_StackItem, previous_item)"}),
    ("tstate_exc_state", {"*": "offsetof(PyThreadState, exc_state)"}),
]

# Frames and thread status the interpreter marks itself (3.12+): tag bits, owners, shim code, and
# 3.15's per-thread GIL flags. Its own block, for easy merges.
FIELDS += [
    ("stackref_tag_bits", {"3.14+": "Py_TAG_BITS"}),
    ("frame_owner_cstack", {"3.12-3.14": "FRAME_OWNED_BY_CSTACK"}),
    ("frame_owner_interpreter", {"3.14+": "FRAME_OWNED_BY_INTERPRETER"}),
    ("code_flag_shim", {"3.13+": "CO_NO_MONITORING_EVENTS"}),
    ("tstate_holds_gil", {"3.14+": "offsetof(PyThreadState, holds_gil)"}),
    ("tstate_gil_requested", {"3.15+": "offsetof(PyThreadState, gil_requested)"}),
]

# Free-threading readiness (docs/free-threading.md): a module's definition and its Py_mod_gil slot.
FIELDS += [
    ("module_def", {"3.10-3.14": "offsetof(PyModuleObject, md_def)"}),
    ("module_token", {"3.15+": "offsetof(PyModuleObject, md_token)"}),
    ("module_token_is_def", {"3.15+": "offsetof(PyModuleObject, md_token_is_def)"}),
    ("moduledef_name", {"*": "offsetof(PyModuleDef, m_name)"}),
    ("moduledef_slots", {"*": "offsetof(PyModuleDef, m_slots)"}),
    ("moduleslot_gil", {"3.13+": "Py_mod_gil"}),
]

# Headers per version (the include dir is include/python3.X; internal headers include each
# other by bare name, which resolves next to the including file).
INCLUDES = {
    (3, 10): [
        "Python.h",
        "frameobject.h",
        "internal/pycore_runtime.h",
        "internal/pycore_interp.h",
        "internal/pycore_pystate.h",
        "internal/pycore_gc.h",
        "internal/pycore_gil.h",
        "internal/pycore_moduleobject.h",
    ],
    (3, 11): [
        "Python.h",
        "internal/pycore_runtime.h",
        "internal/pycore_interp.h",
        "internal/pycore_pystate.h",
        "internal/pycore_gc.h",
        "internal/pycore_gil.h",
        "internal/pycore_frame.h",
        "internal/pycore_code.h",
        "internal/pycore_dict.h",
        "internal/pycore_moduleobject.h",
    ],
}
INCLUDES[(3, 12)] = INCLUDES[(3, 11)]
INCLUDES[(3, 13)] = INCLUDES[(3, 11)]
# 3.14 moved _PyInterpreterFrame to pycore_interpframe_structs.h, _PyThreadStateImpl is in pycore_tstate.h
# and _Py_DebugOffsets in pycore_debug_offsets.h.
INCLUDES[(3, 14)] = INCLUDES[(3, 11)] + [
    "internal/pycore_interpframe.h",
    "internal/pycore_tstate.h",
    "internal/pycore_debug_offsets.h",
]
INCLUDES[(3, 15)] = INCLUDES[(3, 14)]

# Definitions the installed headers do not provide.
EXTRA_DEFS = {
    (3, 10): """\
/* struct _dictkeysobject lives in Objects/dict-common.h, which CPython 3.10 does not install
   (3.11+ moved it to internal/pycore_dict.h). Reproduced here from the v3.10 source; the header
   only declares `typedef struct _dictkeysobject PyDictKeysObject;`. Checked against a live
   3.10.13 with ctypes: dk_size at +8 and dk_nentries at +32 read back correctly, and the first
   entry follows dk_indices (+40) after dk_size index bytes. */
typedef Py_ssize_t (*gilty_dict_lookup_func)
    (PyDictObject *mp, PyObject *key, Py_hash_t hash, PyObject **value_addr);
struct _dictkeysobject {
    Py_ssize_t dk_refcnt;
    Py_ssize_t dk_size;
    gilty_dict_lookup_func dk_lookup;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
};
""",
}

PROBE_TEMPLATE = """\
/* Generated by tools/gen_layouts.py for CPython {major}.{minor}; compiled and run, never committed. */
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <stddef.h>
#include <stdio.h>
{includes}

{extra}
int main(void) {{
    printf("py_version %s\\n", PY_VERSION);
    printf("py_version_hex %lu\\n", (unsigned long)PY_VERSION_HEX);
#ifdef Py_DEBUG
    printf("variant Py_DEBUG\\n");
#endif
#ifdef Py_TRACE_REFS
    printf("variant Py_TRACE_REFS\\n");
#endif
#ifdef Py_GIL_DISABLED
    printf("variant Py_GIL_DISABLED\\n");
#endif
    printf("pointer_size %zu\\n", sizeof(void *));
{prints}
    return 0;
}}
"""


def die(msg: str) -> NoReturn:
    print(f"gen_layouts: error: {msg}", file=sys.stderr)
    sys.exit(2)


def selector_matches(sel: str, ver: tuple[int, int]) -> bool:
    def parse(s: str) -> tuple[int, int]:
        a, b = s.split(".")
        return int(a), int(b)

    if sel == "*":
        return True
    if sel.endswith("+"):
        return ver >= parse(sel[:-1])
    if "-" in sel:
        lo, hi = sel.split("-")
        return parse(lo) <= ver <= parse(hi)
    return ver == parse(sel)


def expr_for(spec: dict[str, str], ver: tuple[int, int]) -> str | None:
    for sel, expr in spec.items():
        if selector_matches(sel, ver):
            return expr
    return None


def layout_fields(path: Path = LAYOUT_RS, struct: str = "Layout") -> list[tuple[str, bool]]:
    """(name, is_option) for every field of `struct`, in declaration order (i64 fields count as u64)."""
    text = path.read_text()
    m = re.search(r"pub struct " + struct + r"\s*\{(.*?)^\}", text, re.S | re.M)
    if not m:
        die(f"cannot find `pub struct {struct}` in {path}")
    body = re.sub(r"//[^\n]*", "", m.group(1))
    out = []
    for name, ty in re.findall(r"pub\s+(\w+)\s*:\s*([^,]+),", body):
        ty = ty.strip()
        if name == "version":
            continue
        if ty in ("u64", "i64"):
            out.append((name, False))
        elif ty in ("Option<u64>", "Option<i64>"):
            out.append((name, True))
        else:
            die(f"{struct} field {name} has unsupported type {ty!r}")
    return out


def check_field_table(fields: list[tuple[str, bool]], table_fields=None, what: str = "layout.rs") -> None:
    table_fields = FIELDS if table_fields is None else table_fields
    table = [n for n, _ in table_fields]
    if len(set(table)) != len(table):
        die("duplicate field in FIELDS")
    missing = [n for n, _ in fields if n not in table]
    extra = [n for n in table if n not in {f for f, _ in fields}]
    if missing or extra:
        die(f"FIELDS and {what} disagree: missing from FIELDS {missing}, not in the struct {extra}")
    spec = dict(table_fields)
    for name, is_opt in fields:
        for ver in SUPPORTED:
            if not is_opt and expr_for(spec[name], ver) is None:
                die(f"u64 field {name} has no C expression for {ver[0]}.{ver[1]}")


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------


def pyenv_root() -> Path | None:
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True)
        return Path(out.stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    env = os.environ.get("PYENV_ROOT")
    if env:
        return Path(env)
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def include_dir(prefix: Path, ver: tuple[int, int]) -> Path:
    return prefix / "include" / f"python{ver[0]}.{ver[1]}"


def minor_of_prefix(prefix: Path) -> tuple[int, int] | None:
    for ver in SUPPORTED:
        if (include_dir(prefix, ver) / "internal").is_dir():
            return ver
    return None


def discover(prefixes: list[str]) -> dict[tuple[int, int], Path]:
    found: dict[tuple[int, int], Path] = {}
    if prefixes:
        for p in prefixes:
            prefix = Path(p).resolve()
            ver = minor_of_prefix(prefix)
            if ver is None:
                die(f"{prefix}: no include/python3.X/internal for a supported version")
            if ver in found:
                die(f"two prefixes for {ver[0]}.{ver[1]}: {found[ver]} and {prefix}")
            found[ver] = prefix
        return found
    found.update(sid_installs())
    root = pyenv_root()
    if root is None:
        return found
    # Plain CPython installs only (not 3.13.0t, pypy, miniconda, ...). Highest patch wins.
    best: dict[tuple[int, int], tuple[int, Path]] = {}
    for d in sorted((root / "versions").glob("*")):
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", d.name)
        if not m:
            continue
        ver = (int(m.group(1)), int(m.group(2)))
        if ver not in SUPPORTED or not (include_dir(d, ver) / "internal").is_dir():
            continue
        patch = int(m.group(3))
        if ver not in best or patch > best[ver][0]:
            best[ver] = (patch, d)
    found.update({v: p for v, (_, p) in best.items()})
    return found


def sid_installs() -> dict[tuple[int, int], Path]:
    """Debian sid's interpreters that tools/sid_pythons.py unpacked (their prefix is ROOT/usr, headers
    from libpython3.X-dev); none when it has not run here."""
    cache = Path(os.environ.get("GILTY_SID_CACHE") or "/root/.cache/gilty/sid-pythons")
    prefix = cache / "root" / "usr"
    return {
        ver: prefix for ver in SUPPORTED if (include_dir(prefix, ver) / "internal").is_dir() and python_exe(prefix, ver).exists()
    }


def python_exe(prefix: Path, ver: tuple[int, int]) -> Path:
    """The interpreter of an install: pyenv's bin/python3, or Debian's bin/python3.X."""
    exe = prefix / "bin" / "python3"
    return exe if exe.exists() else prefix / "bin" / f"python{ver[0]}.{ver[1]}"


# ---------------------------------------------------------------------------------------------
# Probe
# ---------------------------------------------------------------------------------------------


def build_probe(
    ver: tuple[int, int], fields: list[tuple[str, bool]], async_fields: list[tuple[str, bool]] = (), debug_members: list[str] = ()
) -> str:
    spec = dict(FIELDS)
    prints = []
    # Where each `_Py_DebugOffsets` member sits in the block, and its size (only u64 members are kept).
    for path in debug_members:
        prints.append(
            f'    printf("dbg.{path} %zu %zu\\n", offsetof(_Py_DebugOffsets, {path}), sizeof(((_Py_DebugOffsets *)0)->{path}));'
        )
    if debug_members:
        prints.append('    printf("dbgsize %zu\\n", sizeof(_Py_DebugOffsets));')
    for name, _ in fields:
        expr = expr_for(spec[name], ver)
        if expr is not None:
            prints.append(f'    printf("{name} %zu\\n", (size_t)({expr}));')
    # AsyncLayout values may be negative (frame states): printed signed, prefixed to keep them apart.
    async_spec = dict(asyncio_layouts.ASYNC_FIELDS)
    for name, _ in async_fields:
        expr = expr_for(async_spec[name], ver)
        if expr is not None:
            prints.append(f'    printf("async.{name} %lld\\n", (long long)({expr}));')
    includes = INCLUDES[ver] + (asyncio_layouts.ASYNC_INCLUDES if async_fields else [])
    extra = EXTRA_DEFS.get(ver, "") + (asyncio_layouts.ASYNC_DEFS[ver] if async_fields else "")
    return PROBE_TEMPLATE.format(
        major=ver[0],
        minor=ver[1],
        includes="\n".join(f'#include "{h}"' for h in includes),
        extra=extra,
        prints="\n".join(prints),
    )


def compiler() -> str:
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        die(f"C compiler {cc!r} not found")
    return cc


def include_flags(prefix: Path, ver: tuple[int, int]) -> list[str]:
    inc = include_dir(prefix, ver)
    # prefix/include too: Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>.
    return ["-DPy_BUILD_CORE", *core_defines(prefix, ver), f"-I{inc}", f"-I{inc / 'internal'}", f"-I{prefix / 'include'}"]


_CORE_DEFINES: dict[tuple[Path, tuple[int, int]], list[str]] = {}


def core_defines(prefix: Path, ver: tuple[int, int]) -> list[str]:
    """The -D flags the interpreter's own core was compiled with (sysconfig's PY_CORE_CFLAGS) that
    pyconfig.h does not carry: Debian's 3.14/3.15 are built with -D_Py_TIER2=3 -D_Py_JIT (the JIT, off
    by default), which add fields to the runtime, interpreter and thread states."""
    key = (prefix, ver)
    if key not in _CORE_DEFINES:
        snippet = "import sysconfig; print(sysconfig.get_config_var('PY_CORE_CFLAGS') or '')"
        r = subprocess.run([str(python_exe(prefix, ver)), "-I", "-c", snippet], capture_output=True, text=True)
        if r.returncode != 0:
            die(f"reading the build flags of {python_exe(prefix, ver)} failed:\n{r.stderr}")
        _CORE_DEFINES[key] = [f for f in r.stdout.split() if f.startswith("-D_Py_") and not f.startswith("-D_Py_FORTIFY")]
    return _CORE_DEFINES[key]


def debug_offsets_members(ver: tuple[int, int], prefix: Path) -> list[str]:
    """`group.member` paths of `_Py_DebugOffsets` (3.13+) as this build's preprocessor leaves it (its
    #ifdefs resolved); [] for versions without it."""
    if ver < (3, 13):
        return []
    src = "#define Py_BUILD_CORE 1\n" + "".join(f'#include "{h}"\n' for h in INCLUDES[ver])
    r = subprocess.run(
        [compiler(), "-E", "-P", *include_flags(prefix, ver), "-x", "c", "-"], input=src, capture_output=True, text=True
    )
    if r.returncode != 0:
        die(f"preprocessing the {ver[0]}.{ver[1]} headers failed:\n{r.stderr}")
    m = re.search(r"typedef\s+struct\s+_Py_DebugOffsets\s*\{", r.stdout)
    if not m:
        die(f"{prefix}: no _Py_DebugOffsets in the {ver[0]}.{ver[1]} headers")
    members: list[str] = []
    groups: list[list[str]] = []  # members of the nested structs being read, innermost last
    pos = m.end()
    token = re.compile(r"\s*(?:(struct\s*\w*\s*\{)|\}\s*(\w*)\s*;|([^;{}]+);)")
    while True:
        t = token.match(r.stdout, pos)
        if t is None:
            die(f"{prefix}: cannot read _Py_DebugOffsets near {r.stdout[pos : pos + 80]!r}")
        pos = t.end()
        if t.group(1):
            groups.append([])
        elif t.group(3) is not None:
            decl = re.sub(r"__attribute__\s*\(\(.*?\)\)|\[.*?\]", " ", t.group(3))
            name = decl.split()[-1]
            (groups[-1] if groups else members).append(name)
        elif groups:
            inner = groups.pop()
            (groups[-1] if groups else members).extend(f"{t.group(2)}.{n}" for n in inner)
        else:
            return [n for n in members if n not in ("cookie", "version", "free_threaded")]


def run_probe(
    ver: tuple[int, int], prefix: Path, fields: list[tuple[str, bool]], async_fields: list[tuple[str, bool]] = ()
) -> dict[str, str]:
    cc = compiler()
    src = build_probe(ver, fields, async_fields, debug_offsets_members(ver, prefix))
    with tempfile.TemporaryDirectory(prefix="gilty-layouts-") as tmp:
        c_path = Path(tmp) / "probe.c"
        exe = Path(tmp) / "probe"
        c_path.write_text(src)
        cmd = [cc, *include_flags(prefix, ver), "-o", str(exe), str(c_path)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            die(f"compiling the {ver[0]}.{ver[1]} probe failed:\n$ {' '.join(cmd)}\n{r.stderr}")
        r = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    values: dict[str, str] = {}
    variants = []
    for line in r.stdout.splitlines():
        key, _, val = line.partition(" ")
        if key == "variant":
            variants.append(val)
        else:
            values[key] = val
    if variants:
        die(f"{prefix} is a {'/'.join(variants)} build; tables are for default release builds only")
    if values.get("pointer_size") != "8":
        die(f"{prefix}: pointer size {values.get('pointer_size')}, only 64-bit targets are supported")
    got = tuple(int(x) for x in values["py_version"].split(".")[:2])
    if got != ver:
        die(f"{prefix}: headers say {values['py_version']}, expected {ver[0]}.{ver[1]}")
    return values


def check_runtime_symbol(ver: tuple[int, int], prefix: Path, runtime_size: int) -> None:
    """Cross-check sizeof(_PyRuntimeState) against the `_PyRuntime` symbol in libpython, if present
    (Debian's interpreter links libpython statically and exports the symbol itself)."""
    lib = prefix / "lib" / f"libpython{ver[0]}.{ver[1]}.so.1.0"
    if not lib.exists():
        lib = python_exe(prefix, ver)
    if not lib.exists() or shutil.which("nm") is None:
        return
    r = subprocess.run(["nm", "-D", "-S", "--defined-only", str(lib)], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == "_PyRuntime":
            size = int(parts[1], 16)
            if size != runtime_size:
                die(
                    f"{lib}: _PyRuntime symbol is {size} bytes but sizeof(_PyRuntimeState) is "
                    f"{runtime_size}; headers and library do not match"
                )
            return


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def module_name(ver: tuple[int, int]) -> str:
    return f"v{ver[0]}_{ver[1]}"


# Instructions at which the eval loop checks its eval breaker but calls no C code that could release the
# GIL: a thread without the GIL whose innermost frame stands on one is inside the GIL handoff
# (drop_gil/take_gil from the eval breaker), not in native code. Python/ceval.c, CHECK_EVAL_BREAKER.
HANDOFF_OPCODES_SNIPPET = r"""
import dis
ops = dict(getattr(dis, "_all_opmap", None) or {})
ops.update(dis.opmap)
prefixes = ("RESUME", "JUMP_BACKWARD", "POP_JUMP_BACKWARD", "INSTRUMENTED_RESUME", "INSTRUMENTED_JUMP_BACKWARD")
extra = {"JUMP_ABSOLUTE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE"} if "JUMP_ABSOLUTE" in ops else set()
print(" ".join(str(v) for n, v in sorted(ops.items(), key=lambda kv: kv[1])
               if (n.startswith(prefixes) or n in extra) and "NO_INTERRUPT" not in n))
"""


def handoff_opcodes(prefix: Path, ver: tuple[int, int]) -> list[int]:
    exe = python_exe(prefix, ver)
    r = subprocess.run([str(exe), "-I", "-c", HANDOFF_OPCODES_SNIPPET], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"listing opcodes with {exe} failed:\n{r.stderr}")
    return [int(x) for x in r.stdout.split()]


def render_layout(
    ver: tuple[int, int], prefix: Path, values: dict[str, str], fields: list[tuple[str, bool]], handoff: list[int]
) -> str:
    lines = [
        f"// Generated by tools/gen_layouts.py from CPython {values['py_version']} headers ({prefix}). Do not edit.",
        "",
        "use crate::layout::Layout;",
        "",
        "pub const LAYOUT: Layout = Layout {",
        f"    version: ({ver[0]}, {ver[1]}),",
    ]
    for name, is_opt in fields:
        val = values.get(name)
        if is_opt:
            rendered = "None" if val is None else f"Some({int(val)})"
        else:
            rendered = str(int(val))
        lines.append(f"    {name}: {rendered},")
    lines.append("};")
    lines.append("")
    lines.append("/// Opcodes where a thread without the GIL is in the eval-breaker GIL handoff (see the generator).")
    lines.append(f"pub const HANDOFF_OPCODES: &[u8] = &{handoff!r};")
    debug = [(k[4:], *v.split()) for k, v in values.items() if k.startswith("dbg.")]
    if debug:
        # 3.13+: the `_Py_DebugOffsets` block's u64 members (group.member) and where each sits in it.
        lines.append("")
        lines.append("/// `_Py_DebugOffsets` members (group.member) and their offsets in the block, from this version's header.")
        lines.append("pub const DEBUG_OFFSETS: &[(&str, u64)] = &[")
        lines += [f'    ("{path}", {int(off)}),' for path, off, size in debug if int(size) == 8]
        lines.append("];")
        lines.append(f"pub const DEBUG_OFFSETS_SIZE: u64 = {int(values['dbgsize'])};")
    return "\n".join(lines) + "\n"


def render_mod(versions=None) -> str:
    lines = ["// Generated by tools/gen_layouts.py. Do not edit.", ""]
    lines += [f"pub mod {module_name(v)};" for v in (versions or SUPPORTED)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="compare with the committed files instead of writing; exit 1 if they differ"
    )
    ap.add_argument(
        "--prefix", action="append", default=[], help="a CPython install prefix (repeatable); default: pyenv versions"
    )
    args = ap.parse_args()

    fields = layout_fields()
    check_field_table(fields)
    async_fields = layout_fields(ASYNC_RS, "AsyncLayout")
    check_field_table(async_fields, asyncio_layouts.ASYNC_FIELDS, "asyncio_layout.rs")
    installs = discover(args.prefix)

    outputs: dict[Path, str] = {GEN_DIR / "mod.rs": render_mod(), ASYNC_DIR / "mod.rs": render_mod(ASYNC_VERSIONS)}
    skipped = []
    for ver in SUPPORTED:
        prefix = installs.get(ver)
        if prefix is None:
            skipped.append(ver)
            continue
        with_async = ver in ASYNC_VERSIONS
        values = run_probe(ver, prefix, fields, async_fields if with_async else ())
        check_runtime_symbol(ver, prefix, int(values["runtime_size"]))
        outputs[GEN_DIR / f"{module_name(ver)}.rs"] = render_layout(ver, prefix, values, fields, handoff_opcodes(prefix, ver))
        if with_async:
            failed = asyncio_layouts.verify(prefix, ver, values)
            if failed:
                die(f"{prefix}: the _asyncio structs do not match the live interpreter:\n  " + "\n  ".join(failed))
            outputs[ASYNC_DIR / f"{module_name(ver)}.rs"] = asyncio_layouts.render(
                ver, prefix, values["py_version"], values, async_fields
            )
        print(f"gen_layouts: {ver[0]}.{ver[1]}: CPython {values['py_version']} at {prefix}", file=sys.stderr)

    # Only versions with a table, generated now or committed before (a new version joins when generated).
    outputs[GEN_DIR / "mod.rs"] = render_mod(
        [v for v in SUPPORTED if (GEN_DIR / f"{module_name(v)}.rs") in outputs or (GEN_DIR / f"{module_name(v)}.rs").exists()]
    )
    outputs[ASYNC_DIR / "mod.rs"] = render_mod(
        [
            v
            for v in ASYNC_VERSIONS
            if (ASYNC_DIR / f"{module_name(v)}.rs") in outputs or (ASYNC_DIR / f"{module_name(v)}.rs").exists()
        ]
    )
    for ver in skipped:
        path = GEN_DIR / f"{module_name(ver)}.rs"
        why = "not among --prefix" if args.prefix else "not installed"
        note = "committed file left unchanged" if path.exists() else "no committed file: gilty refuses it"
        print(f"gen_layouts: skipped {ver[0]}.{ver[1]} ({why}; {note})", file=sys.stderr)

    return check_or_write(
        outputs, args.check, "gen_layouts", REPO, f"{len(SUPPORTED) - len(skipped)} version(s) checked, {len(skipped)} skipped"
    )


if __name__ == "__main__":
    sys.exit(main())
