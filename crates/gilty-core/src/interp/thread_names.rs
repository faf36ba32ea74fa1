//! Python-level thread names (`threading.Thread.name`) read from the target's memory.
//!
//! Path: `threading._active` (a dict `ident -> Thread`, `Lib/threading.py`; it also holds the main
//! and `_DummyThread`s) → each Thread's `_name` attribute.

use crate::interp::interpreter::Interpreter;
use crate::interp::object_graph::{module_global_in, Reader, TPFLAGS_LONG_SUBCLASS};
use crate::interp::pyobjects::read_small_int;
use crate::process::block_cache::BlockCache;
use std::collections::HashMap;
use std::io;

/// Maps `threading.get_ident()` (the pthread_t in `PyThreadState.thread_id`) to the thread's name.
/// Empty when the target has not imported `threading`. Threads whose `_name` cannot be read (being
/// torn down as we read) are left out.
pub fn python_thread_names(interp: &Interpreter) -> io::Result<HashMap<u64, String>> {
    // Through a page cache: walking `sys.modules` and `_active` reads hundreds of small fields,
    // most of them on a few pages (one read each instead of one per field).
    let cache = BlockCache::new(&interp.mem);
    let r = Reader::new(&cache, &interp.layout);
    let mut out = HashMap::new();
    let Some(active) = module_global_in(
        &r,
        interp
            .main_interp()
            .map_err(|e| io::Error::other(e.message))?,
        "threading",
        "_active",
    )?
    else {
        return Ok(out);
    };
    for (key, thread) in r.dict_items(active)? {
        if !r.has_flag(key, TPFLAGS_LONG_SUBCLASS)? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "threading._active has a non-int key",
            ));
        }
        let ident = read_small_int(r.mem, r.l, key)?;
        if let Ok(Some(name)) = r.get_attr(thread, "_name") {
            if let Ok(name) = r.read_str(name) {
                out.insert(ident as u64, name);
            }
        }
    }
    Ok(out)
}
