//! Offsets for reading asyncio tasks: the C `_asyncio` Task/Future (private to
//! Modules/_asynciomodule.c), coroutine/generator objects, and the containers the task registries
//! use.
//!
//! Values come from `tools/gen_layouts.py`: public and internal structs by offsetof() against each
//! interpreter's headers; `_asyncio`'s private structs by offsetof() on their definitions as each
//! version's module declares them, verified field by field against a live object of that
//! interpreter (the generator refuses to write a table it could not verify). At attach,
//! `tp_basicsize` of the target's `_asyncio.Task` and `_asyncio.Future` must equal `task_size` /
//! `future_size`.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncLayout {
    /// (major, minor) this layout describes.
    pub version: (u8, u8),

    // --- _asyncio FutureObj / TaskObj (a Task starts with a Future's fields)
    pub future_size: u64,
    pub future_loop: u64,
    pub future_callback0: u64,
    pub future_callbacks: u64,
    pub future_result: u64,
    /// `fut_state` (an int: 0 pending, 1 cancelled, 2 finished).
    pub future_state: u64,
    pub task_size: u64,
    pub task_fut_waiter: u64,
    pub task_coro: u64,
    /// A str, or (3.13) an int formatted as `Task-N` on first use.
    pub task_name: u64,
    /// 3.11+: `int task_num_cancels_requested`.
    pub task_num_cancels_requested: Option<u64>,
    /// 3.10: `int task_must_cancel` (3.13 makes it a bit field, not read).
    pub task_must_cancel: Option<u64>,
    /// 3.14+: `fut_awaited_by` (who awaits this future: one object, or a set when
    /// `fut_awaited_by_is_set` is non-zero), kept by `_asyncio` for readers from outside.
    pub future_awaited_by: Option<u64>,
    pub future_awaited_by_is_set: Option<u64>,
    /// 3.14+: `struct llist_node task_node`, the task's link in its thread's (or, after the thread
    /// exited, its interpreter's) circular list of C tasks; `llist_next` is the node's `next`.
    pub task_node: Option<u64>,
    pub llist_next: Option<u64>,
    /// 3.14+: `_PyThreadStateImpl` `asyncio_running_loop`, `asyncio_running_task` and the head of
    /// the thread's task list; `PyInterpreterState.asyncio_tasks_head`, the list of exited threads'
    /// tasks.
    pub tstate_asyncio_running_loop: Option<u64>,
    pub tstate_asyncio_running_task: Option<u64>,
    pub tstate_asyncio_tasks_head: Option<u64>,
    pub interp_asyncio_tasks_head: Option<u64>,
    /// `_asyncio.FutureIter.future`, what `await fut` suspends on for a C future.
    pub futureiter_future: u64,

    // --- PyGenObject / PyCoroObject (cpython/genobject.h; 3.13 also internal/pycore_genobject.h)
    /// 3.10: `PyFrameObject *gi_frame`.
    pub gen_frame: Option<u64>,
    /// 3.11+: the embedded `_PyInterpreterFrame gi_iframe`.
    pub gen_iframe: Option<u64>,
    /// 3.11+: `int8_t gi_frame_state`.
    pub gen_frame_state: Option<u64>,
    pub gen_qualname: u64,
    /// 3.11-3.13: `int stacktop` of `_PyInterpreterFrame` (TOS is `localsplus[stacktop - 1]`).
    pub iframe_stacktop: Option<u64>,
    /// 3.14+: `_PyStackRef *stackpointer` (TOS is `stackpointer[-1]`, a tagged reference).
    pub iframe_stackpointer: Option<u64>,
    /// 3.11+: the awaited object of a frame suspended in `await` sits this many slots below the top
    /// of its stack (1: TOS; 3.15: 2, SEND keeps a slot above it).
    pub iframe_awaited_depth: Option<u64>,
    /// 3.10: `PyFrameObject.f_valuestack` and `f_stackdepth`.
    pub frame_valuestack: Option<u64>,
    pub frame_stackdepth: Option<u64>,
    /// Frame states (3.10 `f_state`, 3.11+ `gi_frame_state`): pycore_frame.h / frameobject.h.
    pub frame_state_created: i64,
    pub frame_state_suspended: i64,
    /// 3.13: suspended inside `yield from` / `await` (the awaited object is TOS).
    pub frame_state_suspended_yield_from: Option<i64>,
    /// 3.15: suspended in `yield from` while another thread looks at it (treated as the above).
    pub frame_state_suspended_yield_from_locked: Option<i64>,
    /// Running now (0 up to 3.14; 3.15 renumbered the states upwards from CREATED = 0).
    pub frame_state_executing: i64,
    /// 3.10: the opcode after `f_lasti` that marks a suspended `yield from`.
    pub opcode_yield_from: Option<u64>,
    /// 3.11, 3.12: RESUME opcodes (oparg >= 2 after an await/yield from).
    pub opcode_resume: Option<u64>,
    pub opcode_resume_alt: Option<u64>,

    // --- containers and callables the task registries and callbacks are made of
    pub type_base: u64,
    pub set_mask: u64,
    pub set_table: u64,
    pub setentry_size: u64,
    pub setentry_key: u64,
    pub weakref_object: u64,
    pub list_item: u64,
    /// PyMethodObject `im_func`, `im_self` (bound methods).
    pub method_func: u64,
    pub method_self: u64,
    /// PyCFunctionObject `m_self` (a C task wakes up through a builtin method bound to it).
    pub cfunction_self: u64,
    pub function_closure: u64,
    pub function_qualname: u64,
    pub cell_ref: u64,
    /// `tp_dict`, `PyMemberDescrObject.d_member` and `PyMemberDef.offset`: where a C type keeps a
    /// field it exposes as an attribute, read from the target's own type (functools.partial's
    /// `args`).
    pub type_dict: u64,
    pub memberdescr_member: u64,
    pub memberdef_offset: u64,
}
