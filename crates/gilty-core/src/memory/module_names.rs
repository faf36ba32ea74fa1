//! The names in a Python process's `sys.modules`, read from outside. Comparing a worker's with its
//! master's tells whether the worker found its code already imported at fork (gunicorn `--preload`,
//! a `multiprocessing` pool forked after imports) or imported it itself.
//!
//! A worker forked from the same executable keeps the master's addresses, so the master's layout
//! and interpreter-state address serve for the worker too; reads go through `/proc/PID/mem`, which
//! leaves copy-on-write sharing alone.

use crate::interp::object_graph::Reader;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::io;

/// Where `sys.modules` is found in a process (and in every fork of it).
#[derive(Debug, Clone, Copy)]
pub struct ModulesLocation {
    pub layout: Layout,
    pub main_interp: u64,
}

/// Module names, sorted; keys that are not str are left out.
pub fn module_names(mem: &dyn Memory, at: &ModulesLocation) -> io::Result<Vec<String>> {
    let r = Reader::new(mem, &at.layout);
    let modules = r.ptr(at.main_interp.wrapping_add(at.layout.interp_modules))?;
    if modules == 0 {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = r
        .dict_items(modules)?
        .into_iter()
        .filter_map(|(k, _)| r.read_str(k).ok())
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}
