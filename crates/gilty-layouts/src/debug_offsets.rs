//! The `_Py_DebugOffsets` block CPython 3.13 places at offset 0 of `_PyRuntime`.
//!
//! Definition: `Include/internal/pycore_runtime.h` (3.13), initialised in
//! `pycore_runtime_init.h`: an 8-byte cookie `"xdebugpy"`, `uint64_t version` (`PY_VERSION_HEX`),
//! `uint64_t free_threaded`, then 70 `uint64_t` sizes/offsets in groups (runtime_state,
//! interpreter_state, thread_state, interpreter_frame, code_object, pyobject, type_object,
//! tuple_object, list_object, dict_object, float_object, long_object, bytes_object,
//! unicode_object, gc). Fields here are named `<group>_<member>` after the C struct, e.g.
//! `runtime_state_size`, `runtime_state_interpreters_head`, `thread_state_native_thread_id`.
//!
//! 3.14 moved the struct to `pycore_debug_offsets.h` and inserted fields into several groups, so
//! this module parses only 3.13.x blocks; [`peek_version`] reads the header of any version.
//! All values are native-endian (the reader and the target share an architecture).

use crate::layout::Layout;

/// The first 8 bytes of `_PyRuntime` on 3.13+.
pub const COOKIE: &[u8; 8] = b"xdebugpy";

/// Bytes before the first offset field: cookie, version, free_threaded.
const HEADER_SIZE: usize = 24;

macro_rules! debug_offsets_struct {
    ($( $(#[$doc:meta])* $name:ident, )*) => {
        /// A parsed 3.13 `_Py_DebugOffsets` block. Offsets are relative to the start of the
        /// struct the group names (`interpreter_state_*` from a `PyInterpreterState`, ...).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct DebugOffsets {
            /// `PY_VERSION_HEX` of the interpreter (e.g. 0x030d00f0 for 3.13.0 final).
            pub version_hex: u64,
            /// Built with `Py_GIL_DISABLED`; struct layouts differ from the default build.
            pub free_threaded: bool,
            $( $(#[$doc])* pub $name: u64, )*
        }

        /// Number of `uint64_t` offset/size fields after the header.
        const FIELD_COUNT: usize = [$(stringify!($name)),*].len();
        /// Their names, in order (`<group>_<member>`).
        #[cfg(test)]
        const FIELD_NAMES: &[&str] = &[$(stringify!($name)),*];

        impl DebugOffsets {
            /// `next` yields the u64 fields in C declaration order (struct expressions evaluate
            /// their fields in the order written).
            fn from_fields(version_hex: u64, free_threaded: bool, mut next: impl FnMut() -> u64) -> Self {
                DebugOffsets { version_hex, free_threaded, $( $name: next(), )* }
            }
        }
    };
}

// In C declaration order; do not reorder.
debug_offsets_struct! {
    // struct _runtime_state (relative to _PyRuntimeState)
    /// sizeof(_PyRuntimeState)
    runtime_state_size,
    runtime_state_finalizing,
    runtime_state_interpreters_head,
    // struct _interpreter_state (relative to PyInterpreterState)
    /// sizeof(PyInterpreterState)
    interpreter_state_size,
    interpreter_state_id,
    interpreter_state_next,
    interpreter_state_threads_head,
    interpreter_state_gc,
    interpreter_state_imports_modules,
    interpreter_state_sysdict,
    interpreter_state_builtins,
    /// `ceval.gil`: the `struct _gil_runtime_state *` pointer.
    interpreter_state_ceval_gil,
    /// `_gil`: the interpreter's embedded `struct _gil_runtime_state`.
    interpreter_state_gil_runtime_state,
    /// `offsetof(struct _gil_runtime_state, enabled)` on free-threaded builds, else 0.
    interpreter_state_gil_runtime_state_enabled,
    /// `_gil.locked` (relative to PyInterpreterState, not to the GIL struct).
    interpreter_state_gil_runtime_state_locked,
    /// `_gil.last_holder` (relative to PyInterpreterState, not to the GIL struct).
    interpreter_state_gil_runtime_state_holder,
    // struct _thread_state (relative to PyThreadState)
    thread_state_size,
    thread_state_prev,
    thread_state_next,
    thread_state_interp,
    thread_state_current_frame,
    thread_state_thread_id,
    thread_state_native_thread_id,
    thread_state_datastack_chunk,
    /// `_status` (bit field word).
    thread_state_status,
    // struct _interpreter_frame (relative to _PyInterpreterFrame)
    interpreter_frame_size,
    interpreter_frame_previous,
    interpreter_frame_executable,
    interpreter_frame_instr_ptr,
    interpreter_frame_localsplus,
    interpreter_frame_owner,
    // struct _code_object (relative to PyCodeObject)
    code_object_size,
    code_object_filename,
    code_object_name,
    code_object_qualname,
    code_object_linetable,
    code_object_firstlineno,
    code_object_argcount,
    code_object_localsplusnames,
    code_object_localspluskinds,
    code_object_co_code_adaptive,
    // struct _pyobject
    pyobject_size,
    pyobject_ob_type,
    // struct _type_object
    type_object_size,
    type_object_tp_name,
    type_object_tp_repr,
    type_object_tp_flags,
    // struct _tuple_object
    tuple_object_size,
    tuple_object_ob_item,
    tuple_object_ob_size,
    // struct _list_object
    list_object_size,
    list_object_ob_item,
    list_object_ob_size,
    // struct _dict_object
    dict_object_size,
    dict_object_ma_keys,
    dict_object_ma_values,
    // struct _float_object
    float_object_size,
    float_object_ob_fval,
    // struct _long_object
    long_object_size,
    long_object_lv_tag,
    long_object_ob_digit,
    // struct _bytes_object
    bytes_object_size,
    bytes_object_ob_size,
    bytes_object_ob_sval,
    // struct _unicode_object
    unicode_object_size,
    unicode_object_state,
    unicode_object_length,
    unicode_object_asciiobject_size,
    // struct _gc (relative to struct _gc_runtime_state)
    gc_size,
    gc_collecting,
}

/// Bytes to read from `_PyRuntime`+0 to parse a 3.13 block.
pub const SIZE_3_13: usize = HEADER_SIZE + 8 * FIELD_COUNT;

fn u64_at(bytes: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap())
}

/// `(version_hex, free_threaded)` from the block header, for any version that has the cookie.
pub fn peek_version(bytes: &[u8]) -> Option<(u64, bool)> {
    if bytes.len() < HEADER_SIZE || &bytes[..8] != COOKIE {
        return None;
    }
    Some((u64_at(bytes, 8), u64_at(bytes, 16) != 0))
}

/// Parses a 3.13 block read from `_PyRuntime`+0.
///
/// `None` if the cookie is absent, `bytes` is shorter than [`SIZE_3_13`], or the block is from
/// another minor version (whose struct has a different field list; see [`peek_version`]).
pub fn parse(bytes: &[u8]) -> Option<DebugOffsets> {
    let (version_hex, free_threaded) = peek_version(bytes)?;
    if bytes.len() < SIZE_3_13 || (version_hex >> 16) & 0xffff != 0x030d {
        return None;
    }
    let mut off = HEADER_SIZE;
    Some(DebugOffsets::from_fields(
        version_hex,
        free_threaded,
        || {
            let v = u64_at(bytes, off);
            off += 8;
            v
        },
    ))
}

impl DebugOffsets {
    pub fn major(&self) -> u8 {
        (self.version_hex >> 24) as u8
    }
    pub fn minor(&self) -> u8 {
        (self.version_hex >> 16) as u8
    }
    pub fn micro(&self) -> u8 {
        (self.version_hex >> 8) as u8
    }
}

struct Merge<'a> {
    diffs: &'a mut Vec<String>,
}

impl Merge<'_> {
    fn u64(&mut self, name: &str, slot: &mut u64, debug: u64) {
        if *slot != debug {
            self.diffs
                .push(format!("{name}: table={} debug={debug}", *slot));
            *slot = debug;
        }
    }
    fn opt(&mut self, name: &str, slot: &mut Option<u64>, debug: u64) {
        if *slot != Some(debug) {
            let table = slot.map_or_else(|| "None".to_string(), |v| v.to_string());
            self.diffs
                .push(format!("{name}: table={table} debug={debug}"));
            *slot = Some(debug);
        }
    }
}

/// Returns a copy of `base` with every field that the debug offsets carry taken from them, plus a
/// list of human-readable "field: table=X debug=Y" disagreements between `base` and the debug
/// offsets.
///
/// Fields the block does not carry keep the table's value: `runtime_interpreters_main`,
/// `runtime_gil`, all `gc_*` except `gc_collecting`, `gil_size`/`interval`/`switch_number`/
/// `cond`/`mutex`/`switch_cond`/`switch_mutex`, `tstate_frame`/`tstate_cframe`/
/// `cframe_current_frame`, `tstate_recursion_depth`, `tstate_state`, `frame_state`,
/// `frame_is_entry`, `code_code`, `code_varnames`, `code_version`, `code_flags`, `type_basicsize`,
/// `type_dictoffset`, `heaptype_cached_keys`, `unicode_compact_size`, `dict_used`, all
/// `dictkeys_*`, `module_dict`.
pub fn apply(base: &Layout, d: &DebugOffsets) -> (Layout, Vec<String>) {
    let mut out = *base;
    let mut diffs = Vec::new();
    let version = (d.major(), d.minor());
    if out.version != version {
        diffs.push(format!(
            "version: table={}.{} debug={}.{}",
            out.version.0, out.version.1, version.0, version.1
        ));
        out.version = version;
    }
    if d.free_threaded {
        diffs.push("free_threaded: table=false debug=true".to_string());
    }
    let mut m = Merge { diffs: &mut diffs };

    m.u64("runtime_size", &mut out.runtime_size, d.runtime_state_size);
    m.u64(
        "runtime_interpreters_head",
        &mut out.runtime_interpreters_head,
        d.runtime_state_interpreters_head,
    );

    m.u64(
        "interp_next",
        &mut out.interp_next,
        d.interpreter_state_next,
    );
    m.u64("interp_id", &mut out.interp_id, d.interpreter_state_id);
    m.u64(
        "interp_threads_head",
        &mut out.interp_threads_head,
        d.interpreter_state_threads_head,
    );
    m.opt(
        "interp_gil_ptr",
        &mut out.interp_gil_ptr,
        d.interpreter_state_ceval_gil,
    );
    m.u64("interp_gc", &mut out.interp_gc, d.interpreter_state_gc);
    m.u64(
        "interp_modules",
        &mut out.interp_modules,
        d.interpreter_state_imports_modules,
    );

    // GIL field offsets are given relative to the interpreter; make them relative to the struct.
    let gil = d.interpreter_state_gil_runtime_state;
    match d
        .interpreter_state_gil_runtime_state_locked
        .checked_sub(gil)
    {
        Some(v) => m.u64("gil_locked", &mut out.gil_locked, v),
        None => m.diffs.push(format!(
            "gil_locked: debug locked offset below _gil offset {gil}"
        )),
    }
    match d
        .interpreter_state_gil_runtime_state_holder
        .checked_sub(gil)
    {
        Some(v) => m.u64("gil_last_holder", &mut out.gil_last_holder, v),
        None => m.diffs.push(format!(
            "gil_last_holder: debug holder offset below _gil offset {gil}"
        )),
    }

    m.u64("gc_collecting", &mut out.gc_collecting, d.gc_collecting);

    m.u64("tstate_size", &mut out.tstate_size, d.thread_state_size);
    m.u64("tstate_prev", &mut out.tstate_prev, d.thread_state_prev);
    m.u64("tstate_next", &mut out.tstate_next, d.thread_state_next);
    m.u64(
        "tstate_interp",
        &mut out.tstate_interp,
        d.thread_state_interp,
    );
    m.opt(
        "tstate_current_frame",
        &mut out.tstate_current_frame,
        d.thread_state_current_frame,
    );
    m.u64(
        "tstate_thread_id",
        &mut out.tstate_thread_id,
        d.thread_state_thread_id,
    );
    m.opt(
        "tstate_native_thread_id",
        &mut out.tstate_native_thread_id,
        d.thread_state_native_thread_id,
    );

    m.u64(
        "frame_code",
        &mut out.frame_code,
        d.interpreter_frame_executable,
    );
    m.u64(
        "frame_previous",
        &mut out.frame_previous,
        d.interpreter_frame_previous,
    );
    m.u64(
        "frame_instr",
        &mut out.frame_instr,
        d.interpreter_frame_instr_ptr,
    );
    m.opt(
        "frame_owner",
        &mut out.frame_owner,
        d.interpreter_frame_owner,
    );
    m.opt(
        "frame_localsplus",
        &mut out.frame_localsplus,
        d.interpreter_frame_localsplus,
    );

    m.u64(
        "code_filename",
        &mut out.code_filename,
        d.code_object_filename,
    );
    m.u64("code_name", &mut out.code_name, d.code_object_name);
    m.opt(
        "code_qualname",
        &mut out.code_qualname,
        d.code_object_qualname,
    );
    m.u64(
        "code_argcount",
        &mut out.code_argcount,
        d.code_object_argcount,
    );
    m.u64(
        "code_firstlineno",
        &mut out.code_firstlineno,
        d.code_object_firstlineno,
    );
    m.u64(
        "code_linetable",
        &mut out.code_linetable,
        d.code_object_linetable,
    );
    m.opt(
        "code_code_adaptive",
        &mut out.code_code_adaptive,
        d.code_object_co_code_adaptive,
    );

    m.u64("object_type", &mut out.object_type, d.pyobject_ob_type);
    // tuple_object.ob_size is offsetof(PyTupleObject, ob_base.ob_size), i.e. PyVarObject.ob_size.
    m.u64(
        "varobject_size",
        &mut out.varobject_size,
        d.tuple_object_ob_size,
    );
    m.u64("type_name", &mut out.type_name, d.type_object_tp_name);
    m.u64("type_flags", &mut out.type_flags, d.type_object_tp_flags);
    m.u64(
        "unicode_length",
        &mut out.unicode_length,
        d.unicode_object_length,
    );
    m.u64(
        "unicode_state",
        &mut out.unicode_state,
        d.unicode_object_state,
    );
    m.u64(
        "unicode_ascii_size",
        &mut out.unicode_ascii_size,
        d.unicode_object_asciiobject_size,
    );
    m.u64("bytes_sval", &mut out.bytes_sval, d.bytes_object_ob_sval);
    m.u64("tuple_item", &mut out.tuple_item, d.tuple_object_ob_item);
    m.u64("long_size", &mut out.long_size, d.long_object_lv_tag);
    m.u64("long_digit", &mut out.long_digit, d.long_object_ob_digit);
    m.u64("dict_keys", &mut out.dict_keys, d.dict_object_ma_keys);
    m.u64("dict_values", &mut out.dict_values, d.dict_object_ma_values);

    (out, diffs)
}

/// A 3.14+ `_Py_DebugOffsets` block, read member by member at the offsets its version's header
/// gives (`DEBUG_OFFSETS` in `generated/v3_XX.rs`): 3.14 and 3.15 insert members into several
/// groups, and the generator takes their places from the header itself rather than from a list kept
/// here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedDebugOffsets {
    /// `PY_VERSION_HEX` of the interpreter.
    pub version_hex: u64,
    /// Built with `Py_GIL_DISABLED`.
    pub free_threaded: bool,
    /// (`group.member`, value) for every u64 member of the version's struct.
    pub values: Vec<(&'static str, u64)>,
}

impl NamedDebugOffsets {
    /// A member's value (`"thread_state.native_thread_id"`), None when this version has no such
    /// member.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }
    pub fn major(&self) -> u8 {
        (self.version_hex >> 24) as u8
    }
    pub fn minor(&self) -> u8 {
        (self.version_hex >> 16) as u8
    }
    pub fn micro(&self) -> u8 {
        (self.version_hex >> 8) as u8
    }
}

/// Parses a block read from `_PyRuntime`+0 with the member offsets of its minor version.
///
/// `None` if the cookie is absent, the block is from another minor version than `fields` describe,
/// or `bytes` is too short for a member.
pub fn parse_named(
    bytes: &[u8],
    minor: u8,
    fields: &[(&'static str, u64)],
) -> Option<NamedDebugOffsets> {
    let (version_hex, free_threaded) = peek_version(bytes)?;
    if (version_hex >> 16) & 0xffff != (0x0300 | minor as u64) {
        return None;
    }
    let mut values = Vec::with_capacity(fields.len());
    for &(name, off) in fields {
        let off = off as usize;
        if off + 8 > bytes.len() {
            return None;
        }
        values.push((name, u64_at(bytes, off)));
    }
    Some(NamedDebugOffsets {
        version_hex,
        free_threaded,
        values,
    })
}

/// `Layout` fields the 3.14+ block carries: (member, field, whether the field is an `Option`).
macro_rules! named_fields {
    ($( $member:literal => $field:ident $kind:ident, )*) => {
        fn merge_named(out: &mut Layout, m: &mut Merge, d: &NamedDebugOffsets) {
            $( if let Some(v) = d.get($member) { m.$kind(stringify!($field), &mut out.$field, v); } )*
        }
    };
}

named_fields! {
    "runtime_state.size" => runtime_size u64,
    "runtime_state.interpreters_head" => runtime_interpreters_head u64,
    "interpreter_state.id" => interp_id u64,
    "interpreter_state.next" => interp_next u64,
    "interpreter_state.threads_head" => interp_threads_head u64,
    "interpreter_state.gc" => interp_gc u64,
    "interpreter_state.imports_modules" => interp_modules u64,
    "interpreter_state.ceval_gil" => interp_gil_ptr opt,
    "thread_state.size" => tstate_size u64,
    "thread_state.prev" => tstate_prev u64,
    "thread_state.next" => tstate_next u64,
    "thread_state.interp" => tstate_interp u64,
    "thread_state.current_frame" => tstate_current_frame opt,
    "thread_state.thread_id" => tstate_thread_id u64,
    "thread_state.native_thread_id" => tstate_native_thread_id opt,
    "thread_state.datastack_chunk" => tstate_datastack_chunk opt,
    "thread_state.holds_gil" => tstate_holds_gil opt,
    "thread_state.gil_requested" => tstate_gil_requested opt,
    "interpreter_frame.previous" => frame_previous u64,
    "interpreter_frame.executable" => frame_code u64,
    "interpreter_frame.instr_ptr" => frame_instr u64,
    "interpreter_frame.localsplus" => frame_localsplus opt,
    "interpreter_frame.owner" => frame_owner opt,
    "code_object.filename" => code_filename u64,
    "code_object.name" => code_name u64,
    "code_object.qualname" => code_qualname opt,
    "code_object.linetable" => code_linetable u64,
    "code_object.firstlineno" => code_firstlineno u64,
    "code_object.argcount" => code_argcount u64,
    "code_object.localsplusnames" => code_localsplusnames opt,
    "code_object.localspluskinds" => code_localspluskinds opt,
    "code_object.co_code_adaptive" => code_code_adaptive opt,
    "pyobject.ob_type" => object_type u64,
    "type_object.tp_name" => type_name u64,
    "type_object.tp_flags" => type_flags u64,
    "tuple_object.ob_item" => tuple_item u64,
    "tuple_object.ob_size" => varobject_size u64,
    "list_object.ob_item" => list_items u64,
    "dict_object.ma_keys" => dict_keys u64,
    "dict_object.ma_values" => dict_values u64,
    "float_object.ob_fval" => float_value u64,
    "long_object.lv_tag" => long_size u64,
    "long_object.ob_digit" => long_digit u64,
    "bytes_object.ob_sval" => bytes_sval u64,
    "unicode_object.state" => unicode_state u64,
    "unicode_object.length" => unicode_length u64,
    "unicode_object.asciiobject_size" => unicode_ascii_size u64,
    "gc.collecting" => gc_collecting u64,
}

/// `apply` for a 3.14+ block: a copy of `base` with every field the block carries taken from it,
/// and the table/block disagreements. The GIL's `locked`/`last_holder` are given relative to the
/// interpreter there and made relative to the GIL struct here.
pub fn apply_named(base: &Layout, d: &NamedDebugOffsets) -> (Layout, Vec<String>) {
    let mut out = *base;
    let mut diffs = Vec::new();
    let version = (d.major(), d.minor());
    if out.version != version {
        diffs.push(format!(
            "version: table={}.{} debug={}.{}",
            out.version.0, out.version.1, version.0, version.1
        ));
        out.version = version;
    }
    if d.free_threaded {
        diffs.push("free_threaded: table=false debug=true".to_string());
    }
    let mut m = Merge { diffs: &mut diffs };
    merge_named(&mut out, &mut m, d);
    if let Some(gil) = d.get("interpreter_state.gil_runtime_state") {
        for (member, name, slot) in [
            (
                "interpreter_state.gil_runtime_state_locked",
                "gil_locked",
                &mut out.gil_locked,
            ),
            (
                "interpreter_state.gil_runtime_state_holder",
                "gil_last_holder",
                &mut out.gil_last_holder,
            ),
        ] {
            match d.get(member).map(|v| v.checked_sub(gil)) {
                Some(Some(v)) => m.u64(name, slot, v),
                Some(None) => m
                    .diffs
                    .push(format!("{name}: debug offset below _gil offset {gil}")),
                None => {}
            }
        }
    }
    (out, diffs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block whose n-th u64 field holds 1000 + n.
    fn synthetic(version_hex: u64, free_threaded: u64) -> Vec<u8> {
        let mut b = COOKIE.to_vec();
        b.extend_from_slice(&version_hex.to_ne_bytes());
        b.extend_from_slice(&free_threaded.to_ne_bytes());
        for i in 0..FIELD_COUNT as u64 {
            b.extend_from_slice(&(1000 + i).to_ne_bytes());
        }
        b
    }

    #[test]
    fn size_matches_c_struct() {
        // 3 runtime + 13 interpreter + 9 thread + 6 frame + 10 code + 2 object + 4 type + 3 tuple
        // + 3 list + 3 dict + 2 float + 3 long + 3 bytes + 4 unicode + 2 gc = 70 u64 fields.
        assert_eq!(FIELD_COUNT, 70);
        assert_eq!(SIZE_3_13, 584);
    }

    #[test]
    fn parse_reads_fields_in_order() {
        let d = parse(&synthetic(0x030d_01f0, 0)).expect("parses");
        assert_eq!((d.major(), d.minor(), d.micro()), (3, 13, 1));
        assert!(!d.free_threaded);
        assert_eq!(d.runtime_state_size, 1000);
        assert_eq!(d.runtime_state_interpreters_head, 1002);
        assert_eq!(d.interpreter_state_size, 1003);
        assert_eq!(d.thread_state_size, 1016);
        assert_eq!(d.interpreter_frame_size, 1025);
        assert_eq!(d.code_object_size, 1031);
        assert_eq!(d.pyobject_size, 1041);
        assert_eq!(d.unicode_object_asciiobject_size, 1067);
        assert_eq!(d.gc_collecting, 1069);
        assert!(parse(&synthetic(0x030d_00f0, 1)).unwrap().free_threaded);
    }

    #[test]
    fn parse_rejects_bad_input() {
        let good = synthetic(0x030d_00f0, 0);
        assert!(parse(&good[..SIZE_3_13 - 1]).is_none());
        assert!(parse(&[]).is_none());
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(parse(&bad).is_none());
        assert!(peek_version(&bad).is_none());
        // 3.14's struct has a different field list.
        let v314 = synthetic(0x030e_00f0, 0);
        assert!(parse(&v314).is_none());
        assert_eq!(peek_version(&v314), Some((0x030e_00f0, false)));
    }

    /// The 3.13 members and places the generator read from the header are the ones this module
    /// parses by hand, and a 3.13 block read by name gives the same layout.
    #[test]
    fn generated_313_members_match_the_hand_parse() {
        let (fields, size) = crate::debug_offsets_fields(3, 13).unwrap();
        assert_eq!(size as usize, SIZE_3_13);
        let names: Vec<String> = fields.iter().map(|(n, _)| n.replace('.', "_")).collect();
        assert_eq!(names, FIELD_NAMES);
        for (i, &(_, off)) in fields.iter().enumerate() {
            assert_eq!(off as usize, HEADER_SIZE + 8 * i);
        }
        let block = synthetic(0x030d_00f0, 0);
        let base = *crate::layout_for(3, 13).unwrap();
        let named = parse_named(&block, 13, fields).unwrap();
        assert!(parse_named(&block, 14, fields).is_none());
        let (by_name, _) = apply_named(&base, &named);
        let (by_hand, _) = apply(&base, &parse(&block).unwrap());
        // The named path also carries datastack_chunk, list/float and code locals (not in `apply`).
        let mut expected = by_hand;
        expected.tstate_datastack_chunk = Some(1023);
        expected.code_localsplusnames = Some(1038);
        expected.code_localspluskinds = Some(1039);
        expected.list_items = 1051;
        expected.float_value = 1057;
        assert_eq!(by_name, expected);
    }

    #[test]
    fn apply_reports_and_overrides() {
        let base = *crate::layout_for(3, 13).unwrap();
        let d = parse(&synthetic(0x030d_00f0, 0)).unwrap();
        let (out, diffs) = apply(&base, &d);
        assert_eq!(out.runtime_size, 1000);
        assert_eq!(out.tstate_current_frame, Some(1020));
        // locked/holder are interp-relative in the block: 1014 - 1012, 1015 - 1012.
        assert_eq!((out.gil_locked, out.gil_last_holder), (2, 3));
        assert!(diffs
            .iter()
            .any(|s| s == &format!("runtime_size: table={} debug=1000", base.runtime_size)));
        // Fields the block does not carry are untouched.
        assert_eq!(out.module_dict, base.module_dict);
        assert_eq!(out.gil_mutex, base.gil_mutex);

        let base312 = *crate::layout_for(3, 12).unwrap();
        let (out, diffs) = apply(&base312, &d);
        assert_eq!(out.version, (3, 13));
        assert!(diffs.iter().any(|s| s == "version: table=3.12 debug=3.13"));
        assert!(diffs
            .iter()
            .any(|s| s == "tstate_current_frame: table=None debug=1020"));
    }
}
