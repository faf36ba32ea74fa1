//! Every extension module in the target's `sys.modules`, read from outside, and whether it declares
//! that it runs without the GIL (docs/free-threading.md).
//!
//! A module object (Include/internal/pycore_moduleobject.h `PyModuleObject`) made from a C
//! definition keeps it: `md_def` up to 3.14, `md_token` when `md_token_is_def` on 3.15 (PEP 793).
//! The definition's `m_slots` (`{int slot; void *value}` pairs up to slot 0) is NULL for
//! single-phase init; on 3.13+ a `Py_mod_gil` slot with `Py_MOD_GIL_NOT_USED` (1) says the module
//! is safe without the GIL, and any other module makes a free-threaded build turn the GIL back on
//! when it is imported (Python/import.c, `_PyImport_CheckGILForModule`). A module imported from a
//! .py file has no definition and is not listed. Which file a definition lives in is the mapping
//! of /proc/PID/maps that holds its address.
//!
//! Every count and pointer is checked: a module that cannot be read is counted in `unreadable`
//! and the scan carries on, so a torn read gives a partial answer, never a failure of the whole.

use crate::error::{from_os, invalid};
use crate::interp::interpreter::Interpreter;
use crate::interp::object_graph::Reader;
use crate::interp::pyobjects::read_c_string;
use crate::process::maps::{read_maps, MapEntry};
use crate::process::memory::Memory;
use crate::process::procfs;
use gilty_layouts::Layout;
use std::collections::HashSet;
use std::io;

/// Most slots read from one definition (CPython's own modules have under ten).
const MAX_SLOTS: u64 = 64;
/// `sizeof(PyModuleDef_Slot)` on 64-bit targets: int, padding, pointer.
const SLOT_SIZE: u64 = 16;
/// `Py_mod_gil` under the limited API, which 3.15 still accepts (Include/slots_generated.h).
const SLOT_GIL_COMPAT: u64 = 4;
/// `Py_MOD_GIL_NOT_USED`.
const GIL_NOT_USED: u64 = 1;
/// Longest module or definition name read.
const MAX_NAME: usize = 512;

/// How the module was initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// `PyModuleDef` with slots (PEP 489).
    MultiPhase,
    /// `PyModuleDef` without slots: `PyModule_Create` from `PyInit_*`.
    SinglePhase,
    /// 3.15 `PyModExport_*` (PEP 793): the slots are not kept in the module.
    Export,
}

/// What the module says about the GIL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GilDecl {
    /// `Py_mod_gil = Py_MOD_GIL_NOT_USED`.
    NotUsed,
    /// `Py_mod_gil = Py_MOD_GIL_USED` (or any other value).
    Used,
    /// No `Py_mod_gil` slot (includes every single-phase module): the GIL comes back on 3.13t+.
    Undeclared,
    /// Cannot be told: before 3.13, or the slots are not kept (3.15 exports).
    Unknown(&'static str),
}

#[derive(Debug, Clone)]
pub struct ExtensionModule {
    /// Its key in `sys.modules`.
    pub name: String,
    /// `m_name` of its definition, when there is one and it reads.
    pub def_name: Option<String>,
    pub init: Init,
    pub gil: GilDecl,
    /// The file whose mapping holds the definition (or the module's `__file__`).
    pub path: Option<String>,
    /// Defined inside the interpreter's own binary (executable or libpython).
    pub builtin: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ModuleScan {
    pub modules: Vec<ExtensionModule>,
    /// `sys.modules` entries (module objects) that could not be read: a torn read.
    pub unreadable: usize,
    /// The first reason one could not be read.
    pub first_error: Option<String>,
}

/// Reads of `sys.modules` tried before a torn one is given up as a partial scan.
const ATTEMPTS: usize = 3;

/// Every extension module of an attached interpreter. A `sys.modules` that does not read (being
/// resized, say) is retried, then given as an empty scan that says why; an exited target is an
/// error.
pub fn scan(interp: &Interpreter) -> crate::Result<ModuleScan> {
    let main = interp.main_interp()?;
    let binaries = [interp.binary.as_str(), interp.executable.as_str()];
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let maps = read_maps(interp.pid)?;
        match extension_modules(&interp.mem, &interp.layout, main, &maps, &binaries) {
            Ok(s) if s.unreadable == 0 => return Ok(s),
            Ok(s) => last = Some(s),
            Err(e) => {
                if !procfs::exists(interp.pid) {
                    return Err(from_os(interp.pid, &e, "/proc/PID/mem"));
                }
                last.get_or_insert(ModuleScan {
                    unreadable: 1,
                    first_error: Some(format!("sys.modules: {e}")),
                    ..ModuleScan::default()
                });
            }
        }
    }
    Ok(last.unwrap_or_default())
}

/// Reads every extension module in `sys.modules` of the interpreter state at `main_interp`.
/// `binaries` are the interpreter's own files (executable, libpython): definitions there are
/// builtins.
pub fn extension_modules(
    mem: &dyn Memory,
    layout: &Layout,
    main_interp: u64,
    maps: &[MapEntry],
    binaries: &[&str],
) -> io::Result<ModuleScan> {
    let r = Reader::new(mem, layout);
    let modules = r.ptr(main_interp.wrapping_add(layout.interp_modules))?;
    if modules == 0 {
        return Ok(ModuleScan::default());
    }
    let items = r.dict_items(modules)?;
    // `sys` is a module on every version; its type is `module` (PyModule_Type).
    let module_type = match r.dict_get_str(modules, "sys")? {
        Some(sys) => r.ptr(sys.wrapping_add(layout.object_type))?,
        None => return Err(invalid("sys.modules has no 'sys'")),
    };
    let mut scan = ModuleScan::default();
    let mut seen = HashSet::new();
    for (key, module) in items {
        let Ok(name) = r.read_str(key) else { continue };
        match r.ptr(module.wrapping_add(layout.object_type)) {
            Ok(tp) if tp == module_type => {}
            // Not a module object (a placeholder, a subclass instance from Python code).
            Ok(_) => continue,
            Err(e) => {
                note_error(&mut scan, &name, &e);
                continue;
            }
        }
        if !seen.insert(module) {
            continue;
        }
        match read_module(&r, module, &name, maps, binaries) {
            Ok(Some(m)) => scan.modules.push(m),
            Ok(None) => {}
            Err(e) => note_error(&mut scan, &name, &e),
        }
    }
    scan.modules.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(scan)
}

fn note_error(scan: &mut ModuleScan, name: &str, e: &io::Error) {
    scan.unreadable += 1;
    if scan.first_error.is_none() {
        scan.first_error = Some(format!("{name}: {e}"));
    }
}

/// One module object; None for a module without a C definition (Python source).
fn read_module(
    r: &Reader,
    module: u64,
    name: &str,
    maps: &[MapEntry],
    binaries: &[&str],
) -> io::Result<Option<ExtensionModule>> {
    let l = r.l;
    let (def, init_if_no_def) = match (l.module_def, l.module_token, l.module_token_is_def) {
        (Some(def_off), _, _) => (r.ptr(module.wrapping_add(def_off))?, None),
        (None, Some(token_off), Some(is_def_off)) => {
            let token = r.ptr(module.wrapping_add(token_off))?;
            match r.mem.read_u8(module.wrapping_add(is_def_off))? {
                // A module from Python source has neither; an export without a token is told
                // apart by its file.
                0 if token == 0 => match file_global(r, module) {
                    Some(f) if f.ends_with(".so") => {
                        return Ok(Some(export_module(name, Some(f), false)))
                    }
                    _ => return Ok(None),
                },
                0 => (token, Some(Init::Export)),
                1 => (token, None),
                _ => return Err(invalid("md_token_is_def is not a bool")),
            }
        }
        _ => return Err(invalid("no module definition offset for this version")),
    };
    if def == 0 {
        return Ok(None);
    }
    let Some(map) = mapping_of(maps, def) else {
        return Err(invalid("module definition outside every mapping"));
    };
    let mut path = map.path.clone().filter(|p| p.starts_with('/'));
    if path.is_none() {
        path = file_global(r, module);
    }
    let builtin = path.as_deref().is_some_and(|p| binaries.contains(&p));
    if init_if_no_def == Some(Init::Export) {
        // The token is the module's own choice (often its spec or a static); the slots the export
        // function returned are not kept, so the GIL declaration cannot be read.
        return Ok(Some(export_module(
            name,
            file_global(r, module).or(path),
            builtin,
        )));
    }
    let def_name = r
        .ptr(def.wrapping_add(l.moduledef_name))
        .ok()
        .filter(|&p| p != 0)
        .and_then(|p| read_c_string(r.mem, p, MAX_NAME).ok());
    let slots = r.ptr(def.wrapping_add(l.moduledef_slots))?;
    let (init, gil) = if slots == 0 {
        (Init::SinglePhase, None)
    } else {
        if mapping_of(maps, slots).is_none() {
            return Err(invalid("m_slots outside every mapping"));
        }
        (Init::MultiPhase, gil_slot(r, slots)?)
    };
    let gil = match l.moduleslot_gil {
        None => GilDecl::Unknown("unknown before 3.13"),
        Some(_) => match gil {
            Some(v) if v == GIL_NOT_USED => GilDecl::NotUsed,
            Some(_) => GilDecl::Used,
            None => GilDecl::Undeclared,
        },
    };
    Ok(Some(ExtensionModule {
        name: name.to_owned(),
        def_name,
        init,
        gil,
        path,
        builtin,
    }))
}

fn export_module(name: &str, path: Option<String>, builtin: bool) -> ExtensionModule {
    ExtensionModule {
        name: name.to_owned(),
        def_name: None,
        init: Init::Export,
        gil: GilDecl::Unknown("PEP 793 export: the slots are not kept in the module"),
        path,
        builtin,
    }
}

/// The value of the `Py_mod_gil` slot, None without one. A walk that finds no end within
/// MAX_SLOTS entries is torn or garbage.
fn gil_slot(r: &Reader, slots: u64) -> io::Result<Option<u64>> {
    let ids: Vec<u64> = match r.l.moduleslot_gil {
        Some(id) => vec![id, SLOT_GIL_COMPAT],
        None => Vec::new(),
    };
    for i in 0..MAX_SLOTS {
        let at = slots.wrapping_add(i * SLOT_SIZE);
        let slot = r.mem.read_i32(at)?;
        if slot == 0 {
            return Ok(None);
        }
        if slot < 0 {
            return Err(invalid("negative module slot id"));
        }
        if ids.contains(&(slot as u64)) {
            return Ok(Some(r.ptr(at.wrapping_add(8))?));
        }
    }
    Err(invalid("module slots without an end"))
}

/// `__file__` in the module's dict (a str), if any.
fn file_global(r: &Reader, module: u64) -> Option<String> {
    let dict = r.ptr(module.wrapping_add(r.l.module_dict)).ok()?;
    if dict == 0 {
        return None;
    }
    let file = r.dict_get_str(dict, "__file__").ok()??;
    r.read_str(file).ok()
}

/// The mapping holding `addr`; an anonymous one right after a file's last mapping (its .bss) counts
/// as that file's.
fn mapping_of(maps: &[MapEntry], addr: u64) -> Option<MapEntry> {
    let i = maps.iter().position(|m| m.start <= addr && addr < m.end)?;
    let m = &maps[i];
    if m.path.is_none() && i > 0 && maps[i - 1].end == m.start && maps[i - 1].path.is_some() {
        return Some(MapEntry {
            path: maps[i - 1].path.clone(),
            ..m.clone()
        });
    }
    Some(m.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::maps::parse_maps;
    use crate::process::memory::Garbage;

    #[test]
    fn bss_after_a_file_counts_as_the_file() {
        let maps = parse_maps(
            "1000-2000 rw-p 00000000 08:01 1 /usr/lib/x.so\n2000-3000 rw-p 00000000 00:00 0 \n\
             5000-6000 rw-p 00000000 00:00 0 \n",
        );
        let p = |a| mapping_of(&maps, a).and_then(|m| m.path);
        assert_eq!(p(0x1800).as_deref(), Some("/usr/lib/x.so"));
        assert_eq!(p(0x2800).as_deref(), Some("/usr/lib/x.so"));
        assert_eq!(p(0x5800), None);
        assert!(mapping_of(&maps, 0x4000).is_none());
    }

    /// Garbage memory must give errors or partial scans, never a panic or a hang.
    #[test]
    fn garbage_memory_is_bounded() {
        let mut garbage = Garbage::new(0x2545_f491_4f6c_dd1d);
        let maps = parse_maps(&format!(
            "{:x}-{:x} rw-p 00000000 00:00 0 /x.so\n",
            Garbage::BASE,
            Garbage::BASE + Garbage::LEN
        ));
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            for _ in 0..10 {
                let mem = garbage.buffer();
                for _ in 0..100 {
                    let addr = Garbage::BASE + garbage.next_word() % Garbage::LEN / 8 * 8;
                    let _ = extension_modules(&mem, l, addr, &maps, &["/x.so"]);
                    let r = Reader::new(&mem, l);
                    let _ = read_module(&r, addr, "m", &maps, &[]);
                }
            }
        }
    }
}
