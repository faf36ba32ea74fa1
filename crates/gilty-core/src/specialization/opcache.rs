//! Python 3.10's opcache, read from outside: which hot code objects have one, and per LOAD_GLOBAL /
//! LOAD_ATTR / LOAD_METHOD site whether its entry is in use. Layout from the generated
//! `OpcacheLayout` (Include/cpython/code.h, Include/internal/pycore_code.h of 3.10).

use crate::interp::frames::FrameWalker;
use crate::interp::interpreter::Interpreter;
use crate::interp::linetable::line_310;
use crate::interp::pyobjects::{read_bytes, read_unicode};
use crate::interp::threads::{python_threads, TidResolver};
use crate::process::memory::Memory;
use crate::process::procfs;
use gilty_layouts::opcodes::OpcacheLayout;
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

const MAX_CODE_BYTES: usize = 1 << 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// In use; the value is how many more misses it tolerates (`optimized` > 0).
    Active(i8),
    /// Assigned but never primed (`optimized` == 0).
    Unprimed,
    /// Deoptimized after misses (`optimized` < 0), or its map slot cleared.
    Deoptimized,
    /// The code object has no opcache yet (called fewer times than the threshold).
    NoOpcache,
}

impl EntryState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Active(_) => "active",
            EntryState::Unprimed => "unprimed",
            EntryState::Deoptimized => "deoptimized",
            EntryState::NoOpcache => "no_opcache",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpcacheSite {
    pub offset: u32,
    pub name: &'static str,
    pub line: i32,
    pub state: EntryState,
}

#[derive(Debug, Clone)]
pub struct OpcacheCode {
    pub address: u64,
    pub name: String,
    pub filename: String,
    pub firstlineno: i32,
    pub has_opcache: bool,
    /// `co_opcache_flag`: calls counted towards creating the opcache.
    pub flag: i32,
    pub entries: u8,
    pub sites: Vec<OpcacheSite>,
}

fn u64_at(b: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
}

/// Reads one code object's opcache state now.
pub fn read_opcache(
    interp: &Interpreter,
    oc: &OpcacheLayout,
    code: u64,
) -> io::Result<OpcacheCode> {
    let l = &interp.layout;
    let mem = &interp.mem;
    let co_code = l
        .code_code
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a 3.10 layout"))?;
    let head = mem.read_vec(code, oc.code_opcache_size as usize + 1)?;
    if let Some(t) = interp.code_type {
        if u64_at(&head, l.object_type) != t {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a code object",
            ));
        }
    }
    let bytecode = read_bytes(mem, l, u64_at(&head, co_code), MAX_CODE_BYTES)?;
    let linetable = read_bytes(mem, l, u64_at(&head, l.code_linetable), MAX_CODE_BYTES)?;
    let firstlineno =
        i32::from_le_bytes(head[l.code_firstlineno as usize..][..4].try_into().unwrap());
    let map_ptr = u64_at(&head, oc.code_opcache_map);
    let cache_ptr = u64_at(&head, oc.code_opcache);
    let flag = i32::from_le_bytes(
        head[oc.code_opcache_flag as usize..][..4]
            .try_into()
            .unwrap(),
    );
    let entries = head[oc.code_opcache_size as usize];
    let units = bytecode.len() / 2;
    let has_opcache = map_ptr != 0 && cache_ptr != 0;
    let map = if has_opcache {
        mem.read_vec(map_ptr, units)?
    } else {
        Vec::new()
    };
    let mut sites = Vec::new();
    for i in 0..units {
        let op = bytecode[2 * i];
        let name = match op {
            o if o == oc.load_global => "LOAD_GLOBAL",
            o if o == oc.load_attr => "LOAD_ATTR",
            o if o == oc.load_method => "LOAD_METHOD",
            _ => continue,
        };
        // The map is indexed by the position after the instruction (next_instr - first_instr).
        let state = if !has_opcache {
            EntryState::NoOpcache
        } else {
            match map.get(i + 1).copied().unwrap_or(0) {
                0 => EntryState::Deoptimized,
                n if n > entries => EntryState::Deoptimized,
                n => {
                    let at = cache_ptr + (n as u64 - 1) * oc.entry_size + oc.entry_optimized;
                    match mem.read_u8(at)? as i8 {
                        v if v > 0 => EntryState::Active(v),
                        0 => EntryState::Unprimed,
                        _ => EntryState::Deoptimized,
                    }
                }
            }
        };
        let line = line_310(&linetable, firstlineno, (2 * i) as i64);
        sites.push(OpcacheSite {
            offset: (2 * i) as u32,
            name,
            line,
            state,
        });
    }
    Ok(OpcacheCode {
        address: code,
        name: read_unicode(mem, l, u64_at(&head, l.code_name))?,
        filename: read_unicode(mem, l, u64_at(&head, l.code_filename))?,
        firstlineno,
        has_opcache,
        flag,
        entries,
        sites,
    })
}

/// Samples where running threads' innermost frames stand for `duration`; code objects by samples.
pub fn hot_code_objects(interp: &Interpreter, duration: Duration, rate_hz: f64) -> Vec<(u64, u64)> {
    let walker = FrameWalker::new(&interp.mem, &interp.layout, interp.code_type);
    let mut resolver = TidResolver::default();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let period = Duration::from_secs_f64(1.0 / rate_hz.max(1.0));
    let start = Instant::now();
    let mut next = start;
    while start.elapsed() < duration {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
        }
        next += period;
        let tids = procfs::thread_ids(interp.pid).unwrap_or_default();
        if tids.is_empty() || procfs::is_gone(interp.pid) {
            break;
        }
        let Ok(threads) = python_threads(interp, &mut resolver, &tids) else {
            continue;
        };
        for th in threads {
            if let Ok(Some((code, _))) = walker.top_position(th.tstate) {
                *counts.entry(code).or_default() += 1;
            }
        }
    }
    let mut out: Vec<(u64, u64)> = counts.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}
