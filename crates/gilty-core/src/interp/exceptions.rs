//! Whether a thread is handling an exception: inside an `except` block, or a `finally` block run
//! because an exception is propagating. That is what `sys.exc_info()` reports: the topmost level of
//! the thread's exception-info stack (`tstate->exc_info`, one level per running generator or
//! coroutine) that holds an exception (Python/errors.c `_PyErr_GetTopmostException`).

use crate::interp::object_repr::{ObjectRepr, TypeCache};
use crate::interp::threads::ExcHead;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::io;

/// Deeper stacks are taken as a cycle read from memory that changed under us.
const MAX_LEVELS: usize = 4096;

/// The type name of the exception the thread at `tstate` is handling, or None.
pub fn handled_exception(
    mem: &dyn Memory,
    l: &Layout,
    tstate: u64,
    types: &TypeCache,
) -> io::Result<Option<String>> {
    let reprs = ObjectRepr::new(mem, l, types);
    let mut item = mem.read_u64(tstate + l.tstate_exc_info)?;
    for _ in 0..MAX_LEVELS {
        if item == 0 {
            return Ok(None);
        }
        let exc = mem.read_u64(item + l.err_stackitem_exc)?;
        if exc != 0 && !reprs.is_none(exc)? {
            // 3.10 keeps the exception's type here; 3.11+ the exception itself.
            return Ok(Some(if l.version.1 == 10 {
                reprs.type_object_name(exc)?
            } else {
                reprs.type_name(exc)?
            }));
        }
        item = mem.read_u64(item + l.err_stackitem_previous)?;
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "exception-info stack too deep",
    ))
}

/// `handled_exception` of every Python thread, by OS thread id (threads whose tid is unknown are
/// left out).
pub fn handled_by_tid(
    interp: &crate::interp::interpreter::Interpreter,
) -> io::Result<std::collections::HashMap<i32, Option<String>>> {
    let (_, threads) = crate::interp::threads::python_threads_settled(
        interp,
        &mut crate::interp::threads::TidResolver::default(),
    )?;
    let types = TypeCache::default();
    let mut out = std::collections::HashMap::new();
    for t in threads {
        if let Some(tid) = t.tid {
            // A failed read leaves the thread out rather than calling it not handling anything.
            if let Ok(found) = handled_exception(&interp.mem, &interp.layout, t.tstate, &types) {
                out.insert(tid, found);
            }
        }
    }
    Ok(out)
}

/// The sampler's per-pass form of `handled_exception`: only whether, not what, and as few reads as
/// possible. The address of None is remembered once seen (a static object), so a level's exception
/// field needs no read of its own to be told apart from None after that.
#[derive(Default)]
pub struct HandlingCheck {
    none: Option<u64>,
    types: TypeCache,
}

impl HandlingCheck {
    /// Whether the thread at `tstate` is handling an exception, from `head` as read with the thread
    /// list. While no generator or coroutine runs on the thread, `exc_info` points at the bottom
    /// level inside the thread state, already read: no read at all. Else one read per level above
    /// it.
    pub fn handling(
        &mut self,
        mem: &dyn Memory,
        l: &Layout,
        tstate: u64,
        head: ExcHead,
    ) -> io::Result<bool> {
        let bottom = tstate + l.tstate_exc_state;
        let len = (l.err_stackitem_exc.max(l.err_stackitem_previous) + 8) as usize;
        let mut buf = [0u8; 64];
        let at = |b: &[u8], off: u64| {
            u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
        };
        let mut item = head.info;
        for _ in 0..MAX_LEVELS {
            if item == 0 {
                return Ok(false);
            }
            // The bottom level has no previous one.
            let (exc, previous) = if item == bottom {
                (head.bottom_exc, 0)
            } else {
                mem.read(item, &mut buf[..len])?;
                (
                    at(&buf, l.err_stackitem_exc),
                    at(&buf, l.err_stackitem_previous),
                )
            };
            if exc != 0 && !self.is_none(mem, l, exc)? {
                return Ok(true);
            }
            item = previous;
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "exception-info stack too deep",
        ))
    }

    fn is_none(&mut self, mem: &dyn Memory, l: &Layout, addr: u64) -> io::Result<bool> {
        if let Some(none) = self.none {
            return Ok(addr == none);
        }
        let none = ObjectRepr::new(mem, l, &self.types).is_none(addr)?;
        if none {
            self.none = Some(addr);
        }
        Ok(none)
    }
}
