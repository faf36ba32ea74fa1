"""The asyncio part of tools/gen_layouts.py: the `AsyncLayout` field table, the `_asyncio` structs the
probe needs (private to Modules/_asynciomodule.c, so no header declares them) and the check of those
structs against a live object of each interpreter.

The private structs are written out below as each version's module declares them. A struct that is
wrong for some build would give wrong offsets silently, so the generator does not trust them: it runs
the interpreter itself, builds a pending Task awaiting a Future, a finished and a cancelled Future, and
reads each object's memory with ctypes. Every pointer field must hold the id() of the object the
attribute returns, every state field the state's number, and the sizes must equal `__basicsize__`;
anything else stops the generator.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

# AsyncLayout field -> {version selector: C expression} (selectors as in gen_layouts.FIELDS).
ASYNC_FIELDS: list[tuple[str, dict[str, str]]] = [
    ("future_size", {"*": "sizeof(gilty_FutureObj)"}),
    ("future_loop", {"*": "offsetof(gilty_FutureObj, fut_loop)"}),
    ("future_callback0", {"*": "offsetof(gilty_FutureObj, fut_callback0)"}),
    ("future_callbacks", {"*": "offsetof(gilty_FutureObj, fut_callbacks)"}),
    ("future_result", {"*": "offsetof(gilty_FutureObj, fut_result)"}),
    ("future_state", {"*": "offsetof(gilty_FutureObj, fut_state)"}),
    ("task_size", {"*": "sizeof(gilty_TaskObj)"}),
    ("task_fut_waiter", {"*": "offsetof(gilty_TaskObj, task_fut_waiter)"}),
    ("task_coro", {"*": "offsetof(gilty_TaskObj, task_coro)"}),
    ("task_name", {"*": "offsetof(gilty_TaskObj, task_name)"}),
    ("task_num_cancels_requested", {"3.11+": "offsetof(gilty_TaskObj, task_num_cancels_requested)"}),
    ("task_must_cancel", {"3.10-3.12": "offsetof(gilty_TaskObj, task_must_cancel)"}),
    ("future_awaited_by", {"3.14+": "offsetof(gilty_FutureObj, fut_awaited_by)"}),
    ("future_awaited_by_is_set", {"3.14+": "offsetof(gilty_FutureObj, fut_awaited_by_is_set)"}),
    ("task_node", {"3.14+": "offsetof(gilty_TaskObj, task_node)"}),
    ("llist_next", {"3.14+": "offsetof(struct llist_node, next)"}),
    ("tstate_asyncio_running_loop", {"3.14+": "offsetof(_PyThreadStateImpl, asyncio_running_loop)"}),
    ("tstate_asyncio_running_task", {"3.14+": "offsetof(_PyThreadStateImpl, asyncio_running_task)"}),
    ("tstate_asyncio_tasks_head", {"3.14+": "offsetof(_PyThreadStateImpl, asyncio_tasks_head)"}),
    ("interp_asyncio_tasks_head", {"3.14+": "offsetof(PyInterpreterState, asyncio_tasks_head)"}),
    ("futureiter_future", {"*": "offsetof(gilty_FutureIterObj, future)"}),
    ("gen_frame", {"3.10": "offsetof(PyGenObject, gi_frame)"}),
    ("gen_iframe", {"3.11+": "offsetof(PyGenObject, gi_iframe)"}),
    ("gen_frame_state", {"3.11+": "offsetof(PyGenObject, gi_frame_state)"}),
    ("gen_qualname", {"*": "offsetof(PyGenObject, gi_qualname)"}),
    ("iframe_stacktop", {"3.11-3.13": "offsetof(_PyInterpreterFrame, stacktop)"}),
    ("iframe_stackpointer", {"3.14+": "offsetof(_PyInterpreterFrame, stackpointer)"}),
    # Where a frame suspended in `await` keeps the awaited object, counted down from the stack pointer:
    # TOS up to 3.14; 3.15's SEND leaves a slot above it (CPython's `_PyGen_yf` peeks at depth 2).
    # Not in any header: checked against a live coroutine below.
    ("iframe_awaited_depth", {"3.11-3.14": "1", "3.15+": "2"}),
    ("frame_valuestack", {"3.10": "offsetof(PyFrameObject, f_valuestack)"}),
    ("frame_stackdepth", {"3.10": "offsetof(PyFrameObject, f_stackdepth)"}),
    ("frame_state_created", {"*": "FRAME_CREATED"}),
    ("frame_state_suspended", {"*": "FRAME_SUSPENDED"}),
    ("frame_state_suspended_yield_from", {"3.13+": "FRAME_SUSPENDED_YIELD_FROM"}),
    ("frame_state_suspended_yield_from_locked", {"3.15+": "FRAME_SUSPENDED_YIELD_FROM_LOCKED"}),
    ("frame_state_executing", {"*": "FRAME_EXECUTING"}),
    ("opcode_yield_from", {"3.10": "YIELD_FROM"}),
    ("opcode_resume", {"3.11-3.12": "RESUME"}),
    ("opcode_resume_alt", {"3.11": "RESUME_QUICK", "3.12": "INSTRUMENTED_RESUME"}),
    ("type_base", {"*": "offsetof(PyTypeObject, tp_base)"}),
    ("set_mask", {"*": "offsetof(PySetObject, mask)"}),
    ("set_table", {"*": "offsetof(PySetObject, table)"}),
    ("setentry_size", {"*": "sizeof(setentry)"}),
    ("setentry_key", {"*": "offsetof(setentry, key)"}),
    ("weakref_object", {"*": "offsetof(PyWeakReference, wr_object)"}),
    ("list_item", {"*": "offsetof(PyListObject, ob_item)"}),
    ("method_func", {"*": "offsetof(PyMethodObject, im_func)"}),
    ("method_self", {"*": "offsetof(PyMethodObject, im_self)"}),
    ("cfunction_self", {"*": "offsetof(PyCFunctionObject, m_self)"}),
    ("function_closure", {"*": "offsetof(PyFunctionObject, func_closure)"}),
    ("function_qualname", {"*": "offsetof(PyFunctionObject, func_qualname)"}),
    ("cell_ref", {"*": "offsetof(PyCellObject, ob_ref)"}),
    ("type_dict", {"*": "offsetof(PyTypeObject, tp_dict)"}),
    ("memberdescr_member", {"*": "offsetof(PyMemberDescrObject, d_member)"}),
    ("memberdef_offset", {"*": "offsetof(PyMemberDef, offset)"}),
]

ASYNC_INCLUDES = ["opcode.h", "structmember.h"]

# The Future head shared by Future and Task, per version. Field names follow the module's own
# (prefix fut_); only the order and types matter for the offsets.
_HEAD_310 = """
    PyObject_HEAD
    PyObject *fut_loop; PyObject *fut_callback0; PyObject *fut_context0; PyObject *fut_callbacks;
    PyObject *fut_exception; PyObject *fut_exception_tb; PyObject *fut_result; PyObject *fut_source_tb;
    PyObject *fut_cancel_msg;
    int fut_state; int fut_log_tb; int fut_blocking;
    PyObject *dict; PyObject *fut_weakreflist;
    struct { PyObject *a, *b, *c; void *previous; } fut_cancelled_exc_state;
"""
_HEAD_311 = """
    PyObject_HEAD
    PyObject *fut_loop; PyObject *fut_callback0; PyObject *fut_context0; PyObject *fut_callbacks;
    PyObject *fut_exception; PyObject *fut_exception_tb; PyObject *fut_result; PyObject *fut_source_tb;
    PyObject *fut_cancel_msg;
    int fut_state; int fut_log_tb; int fut_blocking;
    PyObject *dict; PyObject *fut_weakreflist; PyObject *fut_cancelled_exc;
"""
_HEAD_313 = """
    PyObject_HEAD
    PyObject *fut_loop; PyObject *fut_callback0; PyObject *fut_context0; PyObject *fut_callbacks;
    PyObject *fut_exception; PyObject *fut_exception_tb; PyObject *fut_result; PyObject *fut_source_tb;
    PyObject *fut_cancel_msg; PyObject *fut_cancelled_exc;
    int fut_state;
    unsigned fut_log_tb: 1; unsigned fut_blocking: 1;
"""
# 3.14: who awaits the future (one object, or a set when `fut_awaited_by_is_set`), kept for tools
# that read tasks from outside; bit fields at the end, contiguous with the Task's own.
_HEAD_314 = """
    PyObject_HEAD
    PyObject *fut_loop; PyObject *fut_callback0; PyObject *fut_context0; PyObject *fut_callbacks;
    PyObject *fut_exception; PyObject *fut_exception_tb; PyObject *fut_result; PyObject *fut_source_tb;
    PyObject *fut_cancel_msg; PyObject *fut_cancelled_exc; PyObject *fut_awaited_by;
    int fut_state;
    char fut_is_task; char fut_awaited_by_is_set;
    unsigned fut_log_tb: 1; unsigned fut_blocking: 1;
"""
_TASK_TAIL_310 = """
    PyObject *task_fut_waiter; PyObject *task_coro; PyObject *task_name; PyObject *task_context;
    int task_must_cancel; int task_log_destroy_pending;
"""
_TASK_TAIL_311 = _TASK_TAIL_310 + "    int task_num_cancels_requested;\n"
_TASK_TAIL_313 = """
    unsigned task_must_cancel: 1; unsigned task_log_destroy_pending: 1;
    int task_num_cancels_requested;
    PyObject *task_fut_waiter; PyObject *task_coro; PyObject *task_name; PyObject *task_context;
"""

# 3.14: every C task is on a linked list of its thread (or, once the thread is gone, its interpreter).
_TASK_TAIL_314 = _TASK_TAIL_313 + "    struct llist_node task_node;\n"


def _defs(head: str, tail: str) -> str:
    out = (
        "/* _asyncio's private structs (Modules/_asynciomodule.c), verified against a live object. */\n"
        f"typedef struct {{{head}}} gilty_FutureObj;\n"
        f"typedef struct {{{head}{tail}}} gilty_TaskObj;\n"
        "typedef struct { PyObject_HEAD gilty_FutureObj *future; } gilty_FutureIterObj;\n"
    )
    return out


ASYNC_DEFS = {
    (3, 10): _defs(_HEAD_310, _TASK_TAIL_310),
    (3, 11): _defs(_HEAD_311, _TASK_TAIL_311),
    (3, 12): _defs(_HEAD_311, _TASK_TAIL_311),
    (3, 13): _defs(_HEAD_313, _TASK_TAIL_313),
    (3, 14): _defs(_HEAD_314, _TASK_TAIL_314),
    (3, 15): _defs(_HEAD_314, _TASK_TAIL_314),
}

# Run by the interpreter the table is for, with the probe's values as JSON in argv[1]. Prints the
# failed checks, one a line (nothing when all hold).
VERIFY_SNIPPET = r"""
import asyncio, ctypes, json, sys, threading, _asyncio
v = json.loads(sys.argv[1])
bad = []
def at(addr):
    return ctypes.c_uint64.from_address(addr).value
def word(obj, off):
    return at(id(obj) + off)
def listed(head):
    # the objects on a circular llist whose nodes sit at task_node in each task (3.14+)
    out, node = set(), at(head + v["llist_next"])
    while node not in (0, head) and len(out) < 100000:
        out.add(node - v["task_node"])
        node = at(node + v["llist_next"])
    return out
LISTS = v.get("task_node") is not None
if LISTS:
    ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
    ctypes.pythonapi.PyInterpreterState_Get.restype = ctypes.c_void_p
def int32(obj, off):
    return ctypes.c_int32.from_address(id(obj) + off).value
def expect(what, got, want):
    if got != want:
        bad.append(f"{what}: read {got}, expected {want}")
expect("future_size", v["future_size"], _asyncio.Future.__basicsize__)
expect("task_size", v["task_size"], _asyncio.Task.__basicsize__)
async def child(fut):
    return await fut
async def main():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    task = _asyncio.Task(child(fut), loop=loop, name="gilty-probe")
    await asyncio.sleep(0)
    expect("future_loop", word(task, v["future_loop"]), id(loop))
    expect("task_coro", word(task, v["task_coro"]), id(task._coro))
    expect("task_fut_waiter", word(task, v["task_fut_waiter"]), id(task._fut_waiter))
    expect("task_fut_waiter is fut", task._fut_waiter is fut, True)
    expect("task_name", word(task, v["task_name"]), id(task.get_name()))
    expect("future_state pending", int32(task, v["future_state"]), 0)
    if LISTS:
        tstate = ctypes.pythonapi.PyThreadState_Get()
        expect("tstate_asyncio_running_loop", at(tstate + v["tstate_asyncio_running_loop"]), id(loop))
        expect("tstate_asyncio_running_task", at(tstate + v["tstate_asyncio_running_task"]), id(asyncio.current_task()))
        expect("a task on its thread's list", id(task) in listed(tstate + v["tstate_asyncio_tasks_head"]), True)
        expect("future_awaited_by", word(fut, v["future_awaited_by"]), id(task))
        frame = id(task._coro) + v["gen_iframe"]
        tos = at(at(frame + v["iframe_stackpointer"]) - 8 * v["iframe_awaited_depth"]) & ~3
        expect("iframe_awaited_depth (the awaited object)", tos, id(task._coro.cr_await))
        expect("future_awaited_by_is_set", ctypes.c_uint8.from_address(id(fut) + v["future_awaited_by_is_set"]).value, 0)
    fut.add_done_callback(lambda f: None)
    cbs = fut._callbacks  # callback0 (the task's wakeup) first, then the list
    expect("future_callback0", word(fut, v["future_callback0"]), id(cbs[0][0]))
    expect("future_callbacks", word(fut, v["future_callbacks"]) != 0, True)
    expect("task wakeup's task (cfunction_self)", word(cbs[0][0], v["cfunction_self"]), id(task))
    it = fut.__await__()
    expect("futureiter_future", word(it, v["futureiter_future"]), id(fut))
    fut.set_result(1)
    await task
    # a task cancelled before its first step
    task2 = _asyncio.Task(child(loop.create_future()), loop=loop)
    task2.cancel()
    if v.get("task_num_cancels_requested") is not None:
        expect("task_num_cancels_requested", int32(task2, v["task_num_cancels_requested"]), 1)
    if v.get("task_must_cancel") is not None:
        expect("task_must_cancel", int32(task2, v["task_must_cancel"]), 1)
    try:
        await task2
    except asyncio.CancelledError:
        pass
    done = loop.create_future()
    done.set_result(object())
    expect("future_state finished", int32(done, v["future_state"]), 2)
    expect("future_result", word(done, v["future_result"]), id(done.result()))
    gone = loop.create_future()
    gone.cancel()
    expect("future_state cancelled", int32(gone, v["future_state"]), 1)
asyncio.run(main())
if LISTS:
    # a task left pending by a thread that exited moves to its interpreter's list
    held = []
    def orphan():
        lp = asyncio.new_event_loop()
        async def never():
            await lp.create_future()
        held.append(lp.create_task(never()))
        lp.run_until_complete(asyncio.sleep(0))
    th = threading.Thread(target=orphan)
    th.start()
    th.join()
    interp = ctypes.pythonapi.PyInterpreterState_Get()
    expect("an exited thread's task on the interpreter's list", id(held[0]) in listed(interp + v["interp_asyncio_tasks_head"]), True)
print("\n".join(bad))
"""


def verify(prefix: Path, ver: tuple[int, int], values: dict[str, str]) -> list[str]:
    """The checks that fail for the probe's `_asyncio` values on the live interpreter at `prefix`."""
    exe = prefix / "bin" / "python3"
    if not exe.exists():  # Debian's interpreters are python3.X only
        exe = prefix / "bin" / f"python{ver[0]}.{ver[1]}"
    wanted = {name: int(values[f"async.{name}"]) if f"async.{name}" in values else None for name, _ in ASYNC_FIELDS}
    r = subprocess.run([str(exe), "-I", "-c", VERIFY_SNIPPET, json.dumps(wanted)], capture_output=True, text=True)
    if r.returncode != 0:
        return [f"the check itself failed:\n{r.stderr}"]
    return [line for line in r.stdout.splitlines() if line.strip()]


def render(ver: tuple[int, int], prefix: Path, py_version: str, values: dict[str, str], fields: list[tuple[str, bool]]) -> str:
    lines = [
        f"// Generated by tools/gen_layouts.py from CPython {py_version} headers and a live check ({prefix}). Do not edit.",
        "",
        "use crate::asyncio_layout::AsyncLayout;",
        "",
        "pub const ASYNC_LAYOUT: AsyncLayout = AsyncLayout {",
        f"    version: ({ver[0]}, {ver[1]}),",
    ]
    for name, is_opt in fields:
        val = values.get(f"async.{name}")
        if is_opt:
            rendered = "None" if val is None else f"Some({int(val)})"
        else:
            rendered = str(int(val))
        lines.append(f"    {name}: {rendered},")
    lines.append("};")
    return "\n".join(lines) + "\n"
