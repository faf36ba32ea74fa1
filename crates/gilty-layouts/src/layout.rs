//! The set of CPython internal offsets gilty reads, one value per field.
//!
//! Offsets are byte offsets from the start of the named struct. `None` means the field does not
//! exist in that version. Values come from `tools/gen_layouts.py` (offsetof() compiled against the
//! interpreter's own headers); 3.13+ values are cross-checked against `_Py_DebugOffsets` at attach.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// (major, minor) this layout describes.
    pub version: (u8, u8),

    // --- _PyRuntimeState (Include/internal/pycore_runtime.h)
    pub runtime_size: u64,
    pub runtime_interpreters_head: u64,
    pub runtime_interpreters_main: u64,
    /// Offset of the embedded `struct _gil_runtime_state` (3.10, 3.11: `_PyRuntime.ceval.gil`).
    pub runtime_gil: Option<u64>,

    // --- PyInterpreterState (Include/internal/pycore_interp.h)
    pub interp_next: u64,
    pub interp_id: u64,
    pub interp_threads_head: u64,
    /// Offset of the `struct _gil_runtime_state *` pointer (3.12+: `interp->ceval.gil`).
    pub interp_gil_ptr: Option<u64>,
    /// Offset of the embedded `struct _gc_runtime_state`.
    pub interp_gc: u64,
    /// Offset of the `sys.modules` dict pointer (`modules`, 3.12+: `imports.modules`).
    pub interp_modules: u64,

    // --- struct _gc_runtime_state (Include/internal/pycore_gc.h), relative to interp_gc
    pub gc_enabled: u64,
    pub gc_collecting: u64,
    pub gc_generations: u64,
    pub gc_generation_size: u64,
    pub gc_generation_threshold: u64,
    pub gc_generation_count: u64,
    pub gc_permanent_generation: u64,

    // --- struct _gil_runtime_state (Python/condvar.h + pycore_gil.h)
    pub gil_size: u64,
    pub gil_interval: u64,
    pub gil_last_holder: u64,
    pub gil_locked: u64,
    pub gil_switch_number: u64,
    pub gil_cond: u64,
    pub gil_mutex: u64,
    pub gil_switch_cond: u64,
    pub gil_switch_mutex: u64,

    // --- PyThreadState (Include/cpython/pystate.h)
    pub tstate_size: u64,
    pub tstate_prev: u64,
    pub tstate_next: u64,
    pub tstate_interp: u64,
    /// 3.10: `PyFrameObject *frame`.
    pub tstate_frame: Option<u64>,
    /// 3.11, 3.12: `_PyCFrame *cframe`.
    pub tstate_cframe: Option<u64>,
    /// 3.11, 3.12: `_PyCFrame.current_frame`.
    pub cframe_current_frame: Option<u64>,
    /// 3.13+: `_PyInterpreterFrame *current_frame`.
    pub tstate_current_frame: Option<u64>,
    /// 3.10: `int recursion_depth`: one per Python frame on the stack plus one per C call in
    /// progress made through the call protocol (all of them on 3.10, which has no specialised
    /// calls).
    pub tstate_recursion_depth: Option<u64>,
    pub tstate_thread_id: u64,
    /// 3.11+: `unsigned long native_thread_id` (the OS tid).
    pub tstate_native_thread_id: Option<u64>,
    /// 3.13+: `int state` (0 detached, 1 attached, 2 suspended).
    pub tstate_state: Option<u64>,
    /// 3.11+: `_PyStackChunk *datastack_chunk`, the chunk the thread's newest frames live in.
    pub tstate_datastack_chunk: Option<u64>,
    /// 3.11+: `PyObject **datastack_top`, the end of the used part of that chunk.
    pub tstate_datastack_top: Option<u64>,

    // --- _PyStackChunk (Include/cpython/pystate.h), 3.11+
    /// `struct _PyStackChunk *previous`.
    pub stackchunk_previous: Option<u64>,
    /// `size_t size` (bytes, header included).
    pub stackchunk_size: Option<u64>,

    // --- frames: PyFrameObject (3.10) or _PyInterpreterFrame (3.11+, pycore_frame.h)
    pub frame_code: u64,
    pub frame_previous: u64,
    /// 3.10: `int f_lasti` (index in code units); 3.11/3.12: `prev_instr`; 3.13: `instr_ptr`.
    pub frame_instr: u64,
    /// 3.11+: `char owner`.
    pub frame_owner: Option<u64>,
    /// 3.10: `PyFrameState f_state` (char; frameobject.h), to tell live frames from freed ones.
    pub frame_state: Option<u64>,
    /// 3.11: `bool is_entry`, set on the frame a C caller entered the eval loop with.
    pub frame_is_entry: Option<u64>,
    /// 3.10: `f_localsplus`; 3.11+: `localsplus` (first local = first argument).
    pub frame_localsplus: Option<u64>,

    // --- PyCodeObject (Include/cpython/code.h)
    pub code_filename: u64,
    pub code_name: u64,
    /// 3.11+: `co_qualname`.
    pub code_qualname: Option<u64>,
    /// 3.10: `co_varnames` (a tuple of str; 3.11+ folds it into `co_localsplusnames`).
    pub code_varnames: Option<u64>,
    pub code_argcount: u64,
    pub code_firstlineno: u64,
    pub code_linetable: u64,
    /// 3.10: `PyObject *co_code` (a bytes object).
    pub code_code: Option<u64>,
    /// 3.11+: offset of the inline `co_code_adaptive` array.
    pub code_code_adaptive: Option<u64>,
    /// 3.12+: `uint32_t co_version`, set from an interpreter-wide counter when the code object is
    /// created: a new code object at a reused address has another.
    pub code_version: Option<u64>,

    // --- objects (Include/object.h, cpython/unicodeobject.h, ...)
    pub object_type: u64,
    pub varobject_size: u64,
    pub type_name: u64,
    pub type_flags: u64,
    pub type_basicsize: u64,
    pub type_dictoffset: u64,
    pub heaptype_cached_keys: u64,
    pub unicode_length: u64,
    pub unicode_state: u64,
    /// sizeof(PyASCIIObject): where compact ASCII data starts.
    pub unicode_ascii_size: u64,
    /// sizeof(PyCompactUnicodeObject): where compact non-ASCII data starts.
    pub unicode_compact_size: u64,
    pub bytes_sval: u64,
    pub tuple_item: u64,
    /// 3.12+: `lv_tag` (sign and digit count); earlier: ob_size.
    pub long_size: u64,
    pub long_digit: u64,
    pub dict_used: u64,
    pub dict_keys: u64,
    pub dict_values: u64,
    /// 3.10: `Py_ssize_t dk_size`; 3.11+: `uint8_t dk_log2_size`.
    pub dictkeys_size: u64,
    /// 3.11+: `uint8_t dk_kind`.
    pub dictkeys_kind: Option<u64>,
    /// 3.11+: `uint8_t dk_log2_index_bytes`.
    pub dictkeys_log2_index_bytes: Option<u64>,
    pub dictkeys_nentries: u64,
    pub dictkeys_indices: u64,
    pub module_dict: u64,

    // --- dump --locals: a frame's variables and the builtin objects whose values are shown
    /// 3.11+: `int co_nlocalsplus` (locals + cells + free variables).
    pub code_nlocalsplus: Option<u64>,
    /// 3.11+: `co_localsplusnames`, a tuple of str, one per `localsplus` slot.
    pub code_localsplusnames: Option<u64>,
    /// 3.11+: `co_localspluskinds`, a bytes object, one kind byte per slot (CO_FAST_*).
    pub code_localspluskinds: Option<u64>,
    /// `int co_nlocals`.
    pub code_nlocals: u64,
    /// `int co_kwonlyargcount`.
    pub code_kwonlyargcount: u64,
    /// `int co_flags` (CO_VARARGS, CO_VARKEYWORDS tell `*args` / `**kwargs` apart from locals).
    pub code_flags: u64,
    /// 3.10: `co_cellvars` and `co_freevars`, tuples of str naming the slots after the locals.
    pub code_cellvars: Option<u64>,
    pub code_freevars: Option<u64>,
    /// `double ob_fval` of PyFloatObject.
    pub float_value: u64,
    /// `PyObject **ob_item` of PyListObject.
    pub list_items: u64,
    /// PySetObject: `used` (live keys), `mask` (slots - 1), `table` (`setentry *`).
    pub set_used: u64,
    pub set_mask: u64,
    pub set_table: u64,
    /// sizeof(setentry) and offsetof(setentry, key).
    pub setentry_size: u64,
    pub setentry_key: u64,
    /// `PyObject *ob_ref` of PyCellObject.
    pub cell_ref: u64,

    // --- handling an exception: the thread's exception-info stack (`sys.exc_info()`)
    /// `_PyErr_StackItem *exc_info`: the top of the thread's (or running generator's) stack.
    pub tstate_exc_info: u64,
    /// `_PyErr_StackItem`: 3.10 `exc_type` (a type), 3.11+ `exc_value` (the exception); NULL or
    /// None when that level handles nothing.
    pub err_stackitem_exc: u64,
    /// `_PyErr_StackItem *previous_item`.
    pub err_stackitem_previous: u64,
    /// `_PyErr_StackItem exc_state`: the bottom level, inside the thread state (where `exc_info`
    /// points while no generator or coroutine runs).
    pub tstate_exc_state: u64,

    // --- 3.12+: frames and thread status the interpreter marks itself
    /// 3.14+: `Py_TAG_BITS`, the low bits of a `_PyStackRef` (`f_executable`) that are tags, not
    /// address: cleared before the value is used as a pointer.
    pub stackref_tag_bits: Option<u64>,
    /// 3.12-3.14: `FRAME_OWNED_BY_CSTACK`, the owner of the shim frame a C caller pushes.
    pub frame_owner_cstack: Option<u64>,
    /// 3.14+: `FRAME_OWNED_BY_INTERPRETER`, the owner of the interpreter's own entry and base
    /// frames.
    pub frame_owner_interpreter: Option<u64>,
    /// 3.13+: `CO_NO_MONITORING_EVENTS`, the `co_flags` bit of code the interpreter makes for
    /// itself.
    pub code_flag_shim: Option<u64>,
    /// 3.14+: `int holds_gil`, the thread state's own flag that it holds the GIL.
    pub tstate_holds_gil: Option<u64>,
    /// 3.15+: `int gil_requested`, set while the thread waits in take_gil.
    pub tstate_gil_requested: Option<u64>,

    // --- free-threading readiness: which definition a module came from, and its slots
    /// 3.10-3.14: `PyModuleDef *md_def` (NULL for a module not made from a definition, such as
    /// one imported from a .py file).
    pub module_def: Option<u64>,
    /// 3.15+ (PEP 793): `void *md_token`, the `PyModuleDef` when `md_token_is_def`, else the
    /// module's `Py_mod_token` (md_def is gone).
    pub module_token: Option<u64>,
    /// 3.15+: `bool md_token_is_def`.
    pub module_token_is_def: Option<u64>,
    /// `const char *m_name` of a `PyModuleDef`.
    pub moduledef_name: u64,
    /// `PyModuleDef_Slot *m_slots` of a `PyModuleDef` (NULL: single-phase init).
    pub moduledef_slots: u64,
    /// 3.13+: the `Py_mod_gil` slot id as the full API of this version spells it (3.15 renumbered
    /// it; its limited API keeps 4).
    pub moduleslot_gil: Option<u64>,
}

impl Layout {
    /// The object a frame's `f_executable` (3.13+) or `f_code` refers to, its tag bits cleared.
    pub fn frame_code_ptr(&self, raw: u64) -> u64 {
        raw & !self.stackref_tag_bits.unwrap_or(0)
    }

    /// A frame with this `owner` is the interpreter's, never the program's: the C-stack shim
    /// (3.12+) or the interpreter's entry/base frame (3.14+). Not shown, and a thread's stack
    /// starts at one.
    pub fn is_interpreter_owner(&self, owner: u8) -> bool {
        let owner = Some(owner as u64);
        owner.is_some_and(|o| {
            self.frame_owner_cstack == Some(o) || self.frame_owner_interpreter == Some(o)
        })
    }
}
