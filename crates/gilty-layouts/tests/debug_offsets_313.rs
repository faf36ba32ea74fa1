//! The generated 3.13 table must agree with the `_Py_DebugOffsets` block compiled into the real
//! libpython3.13 (the initial contents of its `.PyRuntime` section, i.e. `_PyRuntime`+0).

use gilty_layouts::debug_offsets::{self, DebugOffsets};
use gilty_layouts::layout_for;
use std::path::Path;

const LIBPYTHON_313: &str = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// (file offset, size) of the named section of a little-endian ELF64 file.
fn elf64_section(file: &[u8], name: &str) -> Option<(usize, usize)> {
    assert_eq!(&file[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(file[4], 2, "not ELF64");
    assert_eq!(file[5], 1, "not little-endian");
    let shoff = u64_at(file, 0x28) as usize;
    let shentsize = u16_at(file, 0x3a) as usize;
    let shnum = u16_at(file, 0x3c) as usize;
    let shstrndx = u16_at(file, 0x3e) as usize;
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(file, sh(shstrndx) + 24) as usize;
    (0..shnum).find_map(|i| {
        let name_off = strtab + u32_at(file, sh(i)) as usize;
        let end = file[name_off..].iter().position(|&c| c == 0)? + name_off;
        (&file[name_off..end] == name.as_bytes()).then(|| {
            (
                u64_at(file, sh(i) + 24) as usize,
                u64_at(file, sh(i) + 32) as usize,
            )
        })
    })
}

/// The debug offsets of the installed 3.13.0, or `None` (with a printed reason) to skip.
fn real_block() -> Option<(DebugOffsets, usize)> {
    if !Path::new(LIBPYTHON_313).exists() {
        eprintln!("skipping: {LIBPYTHON_313} not found");
        return None;
    }
    let file = std::fs::read(LIBPYTHON_313).expect("read libpython");
    let (off, size) = elf64_section(&file, ".PyRuntime").expect("no .PyRuntime section");
    assert!(size >= debug_offsets::SIZE_3_13);
    let bytes = &file[off..off + debug_offsets::SIZE_3_13];
    assert_eq!(&bytes[..8], debug_offsets::COOKIE);
    let d = debug_offsets::parse(bytes).expect("parse _Py_DebugOffsets");
    Some((d, size))
}

#[test]
fn real_block_header() {
    let Some((d, section_size)) = real_block() else {
        return;
    };
    assert_eq!(d.version_hex, 0x030d_00f0);
    assert_eq!((d.major(), d.minor(), d.micro()), (3, 13, 0));
    assert!(!d.free_threaded);
    // sizeof(_PyRuntimeState) is the whole section.
    assert_eq!(d.runtime_state_size as usize, section_size);
}

#[test]
fn generated_313_agrees_with_real_block() {
    let Some((d, _)) = real_block() else { return };
    let base = layout_for(3, 13).unwrap();
    let (merged, diffs) = debug_offsets::apply(base, &d);
    assert!(
        diffs.is_empty(),
        "generated 3.13 table disagrees with _Py_DebugOffsets:\n{}",
        diffs.join("\n")
    );
    assert_eq!(&merged, base);
}

#[test]
fn real_block_values() {
    let Some((d, _)) = real_block() else { return };
    // Values the table does not hold, checked against the research notes.
    assert_eq!(d.interpreter_state_gil_runtime_state, 7752);
    assert_eq!(d.interpreter_state_gil_runtime_state_locked, 7768);
    assert_eq!(d.interpreter_state_gil_runtime_state_holder, 7760);
    assert_eq!(d.interpreter_state_gil_runtime_state_enabled, 0);
    assert_eq!(d.gc_collecting, 200);
    // Holder/locked are interpreter-relative in the block; relative to `_gil` they are the
    // generated struct offsets.
    let l = layout_for(3, 13).unwrap();
    assert_eq!(
        d.interpreter_state_gil_runtime_state_locked - d.interpreter_state_gil_runtime_state,
        l.gil_locked
    );
    assert_eq!(
        d.interpreter_state_gil_runtime_state_holder - d.interpreter_state_gil_runtime_state,
        l.gil_last_holder
    );
}

#[test]
fn older_table_against_313_block_reports_disagreements() {
    let Some((d, _)) = real_block() else { return };
    let (merged, diffs) = debug_offsets::apply(layout_for(3, 12).unwrap(), &d);
    assert_eq!(merged.version, (3, 13));
    assert!(
        diffs.iter().any(|s| s == "version: table=3.12 debug=3.13"),
        "{diffs:?}"
    );
    assert!(
        diffs
            .iter()
            .any(|s| s == "runtime_size: table=459944 debug=283320"),
        "{diffs:?}"
    );
}

/// 3.14 and 3.15 (Debian sid's, unpacked by tools/sid_pythons.py): the block in the interpreter's
/// own `.PyRuntime` section, read member by member at the places the generator took from the
/// header, agrees with the generated table in every member gilty uses, and says it is no
/// free-threaded build.
#[test]
fn sid_blocks_agree_with_their_generated_tables() {
    let cache = std::env::var("GILTY_SID_CACHE")
        .unwrap_or_else(|_| "/root/.cache/gilty/sid-pythons".into());
    for minor in [14u8, 15] {
        let exe = format!("{cache}/root/usr/bin/python3.{minor}");
        if !Path::new(&exe).exists() {
            eprintln!("skipping 3.{minor}: {exe} not found");
            continue;
        }
        let file = std::fs::read(&exe).expect("read the interpreter");
        let (off, size) = elf64_section(&file, ".PyRuntime").expect("no .PyRuntime section");
        let (fields, block_size) =
            gilty_layouts::debug_offsets_fields(3, minor).expect("generated members");
        assert!(size >= block_size as usize);
        let bytes = &file[off..off + block_size as usize];
        let d = debug_offsets::parse_named(bytes, minor, fields).expect("parse the block");
        assert_eq!((d.major(), d.minor()), (3, minor));
        assert!(!d.free_threaded);
        let table = layout_for(3, minor).unwrap();
        let (merged, diffs) = debug_offsets::apply_named(table, &d);
        assert!(diffs.is_empty(), "3.{minor}: {diffs:?}");
        assert_eq!(&merged, table);
        // The members gilty takes from 3.15's thread state are in the block it checks.
        if minor >= 15 {
            assert_eq!(d.get("thread_state.holds_gil"), table.tstate_holds_gil);
            assert_eq!(
                d.get("thread_state.gil_requested"),
                table.tstate_gil_requested
            );
        }
    }
}
