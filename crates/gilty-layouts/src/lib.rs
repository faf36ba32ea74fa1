//! CPython internal struct layouts, one table per supported minor version.
//!
//! The tables in `generated/` are produced by `tools/gen_layouts.py` from each interpreter's own
//! headers (offsetof()/sizeof() compiled with `-DPy_BUILD_CORE`); do not edit them by hand.
//! For 3.13+, [`debug_offsets`] parses the `_Py_DebugOffsets` block the interpreter carries at
//! `_PyRuntime`+0 and can cross-check or override a table with it.

pub mod asyncio_layout;
pub mod debug_offsets;
// Written by tools/gen_layouts.py, whose --check compares them byte for byte.
#[rustfmt::skip]
mod generated;
#[rustfmt::skip]
mod generated_asyncio;
pub mod layout;

pub use asyncio_layout::AsyncLayout;
pub use layout::Layout;

/// (major, minor) versions that have a generated table.
pub const SUPPORTED: &[(u8, u8)] = &[(3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15)];

/// The layout table for CPython `major.minor` (default release build, 64-bit), if supported.
///
/// This is the one place that maps a version to its table.
pub fn layout_for(major: u8, minor: u8) -> Option<&'static Layout> {
    match (major, minor) {
        (3, 10) => Some(&generated::v3_10::LAYOUT),
        (3, 11) => Some(&generated::v3_11::LAYOUT),
        (3, 12) => Some(&generated::v3_12::LAYOUT),
        (3, 13) => Some(&generated::v3_13::LAYOUT),
        (3, 14) => Some(&generated::v3_14::LAYOUT),
        (3, 15) => Some(&generated::v3_15::LAYOUT),
        _ => None,
    }
}

/// The asyncio offsets (`_asyncio` Task/Future, coroutines, registries; 3.14+ also the per-thread
/// task lists) for CPython `major.minor`.
pub fn asyncio_layout_for(major: u8, minor: u8) -> Option<&'static AsyncLayout> {
    match (major, minor) {
        (3, 10) => Some(&generated_asyncio::v3_10::ASYNC_LAYOUT),
        (3, 11) => Some(&generated_asyncio::v3_11::ASYNC_LAYOUT),
        (3, 12) => Some(&generated_asyncio::v3_12::ASYNC_LAYOUT),
        (3, 13) => Some(&generated_asyncio::v3_13::ASYNC_LAYOUT),
        (3, 14) => Some(&generated_asyncio::v3_14::ASYNC_LAYOUT),
        (3, 15) => Some(&generated_asyncio::v3_15::ASYNC_LAYOUT),
        _ => None,
    }
}

/// 3.13+: the `_Py_DebugOffsets` members (`group.member`) and their offsets in the block, and the
/// block's size, from the version's own header.
pub fn debug_offsets_fields(major: u8, minor: u8) -> Option<(&'static [(&'static str, u64)], u64)> {
    match (major, minor) {
        (3, 13) => Some((
            generated::v3_13::DEBUG_OFFSETS,
            generated::v3_13::DEBUG_OFFSETS_SIZE,
        )),
        (3, 14) => Some((
            generated::v3_14::DEBUG_OFFSETS,
            generated::v3_14::DEBUG_OFFSETS_SIZE,
        )),
        (3, 15) => Some((
            generated::v3_15::DEBUG_OFFSETS,
            generated::v3_15::DEBUG_OFFSETS_SIZE,
        )),
        _ => None,
    }
}

/// Opcodes at which a thread without the GIL can only be inside the eval breaker's GIL handoff
/// (backward jumps and RESUME check the eval breaker and call no C code), for `major.minor`.
pub fn handoff_opcodes(major: u8, minor: u8) -> &'static [u8] {
    match (major, minor) {
        (3, 10) => generated::v3_10::HANDOFF_OPCODES,
        (3, 11) => generated::v3_11::HANDOFF_OPCODES,
        (3, 12) => generated::v3_12::HANDOFF_OPCODES,
        (3, 13) => generated::v3_13::HANDOFF_OPCODES,
        (3, 14) => generated::v3_14::HANDOFF_OPCODES,
        (3, 15) => generated::v3_15::HANDOFF_OPCODES,
        _ => &[],
    }
}

#[rustfmt::skip]
mod generated_opcodes;
pub mod opcodes;

/// Opcode metadata for reading adaptive bytecode of CPython `major.minor` (3.11+), if supported.
pub fn opcodes_for(major: u8, minor: u8) -> Option<&'static opcodes::OpcodeTable> {
    match (major, minor) {
        (3, 11) => Some(&generated_opcodes::v3_11::OPCODES),
        (3, 12) => Some(&generated_opcodes::v3_12::OPCODES),
        (3, 13) => Some(&generated_opcodes::v3_13::OPCODES),
        (3, 14) => Some(&generated_opcodes::v3_14::OPCODES),
        (3, 15) => Some(&generated_opcodes::v3_15::OPCODES),
        _ => None,
    }
}

/// The 3.10 opcache layout, if `major.minor` has one.
pub fn opcache_for(major: u8, minor: u8) -> Option<&'static opcodes::OpcacheLayout> {
    match (major, minor) {
        (3, 10) => Some(&generated_opcodes::v3_10::OPCACHE),
        _ => None,
    }
}
