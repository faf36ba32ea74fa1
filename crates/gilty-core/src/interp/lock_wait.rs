//! Which `threading.Lock` or `RLock` a thread blocked in a futex waits to acquire, found from the
//! futex's address and the thread's C stack, and whether that lock is held (and, for an `RLock`,
//! by which thread).
//!
//! - 3.10–3.13: a lock object holds a pointer to a semaphore (`lock_lock`, 16 bytes into the
//!   object), and the waiter sleeps on the semaphore's own word, so the futex address is that
//!   pointer. The object itself is on the waiter's C stack (`acquire`'s `self`): the stack's words
//!   are tried as objects whose `lock_lock` is the futex address.
//! - 3.14+: a lock is a `PyMutex` inside the object (16 bytes in), and a waiter parks on a
//!   semaphore in a `wait_entry` on its own stack, right after the word holding the mutex's address
//!   (`Python/parking_lot.c`): the words just below the futex address are tried as mutexes.
//!
//! Either way the candidate object must be of type `_thread.lock` or `_thread.RLock`.

use crate::interp::object_repr::{ObjectRepr, TypeCache};
use crate::process::memory::Memory;
use gilty_layouts::Layout;

/// What a blocked thread waits to acquire.
#[derive(Debug, Clone)]
pub struct LockWait {
    pub address: u64,
    /// `_thread.lock` or `_thread.RLock`.
    pub kind: String,
    /// The lock reads as held (None: not readable).
    pub locked: Option<bool>,
    /// An `RLock`'s owner (`threading.get_ident()` of its holder); a plain lock records none.
    pub owner_ident: Option<u64>,
}

/// The object header before a lock's own fields.
const HEAD: u64 = 16;
/// How far up the waiter's C stack its lock object is looked for (3.10–3.12): `acquire` and the
/// semaphore wait sit a few hundred bytes above the stack pointer.
const STACK_WINDOW: u64 = 16 * 1024;

pub fn lock_waited(
    mem: &dyn Memory,
    l: &Layout,
    minor: u8,
    futex: u64,
    sp: u64,
) -> Option<LockWait> {
    let types = TypeCache::default();
    let repr = ObjectRepr::new(mem, l, &types);
    let kind_of = |obj: u64| -> Option<String> {
        let name = repr.type_name(obj).ok()?;
        matches!(name.as_str(), "_thread.lock" | "_thread.RLock").then_some(name)
    };
    let parked = || {
        // The wait entry's `addr` is the word before its semaphore; a few more are tried in case
        // the layout moves a field.
        (1..=4u64).find_map(|i| {
            let mutex = mem.read_u64(futex.checked_sub(8 * i)?).ok()?;
            let obj = mutex.checked_sub(HEAD)?;
            kind_of(obj).map(|k| (obj, k))
        })
    };
    let on_semaphore = || {
        if sp == 0 {
            return None;
        }
        let words = mem.read_vec(sp, STACK_WINDOW as usize).ok().or_else(|| {
            // The stack's top page may end within the window.
            mem.read_vec(sp, 4096).ok()
        })?;
        words
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .filter(|&w| w % 8 == 0 && w > 4096)
            .find_map(|obj| {
                (mem.read_u64(obj.checked_add(HEAD)?).ok()? == futex)
                    .then(|| kind_of(obj).map(|k| (obj, k)))
                    .flatten()
            })
    };
    let found = if minor >= 14 {
        parked().or_else(on_semaphore)
    } else {
        on_semaphore()
    }?;
    let (address, kind) = found;
    let rlock = kind.ends_with("RLock");
    let (locked, owner_ident) = match (minor, rlock) {
        // `char locked` after the semaphore pointer and the weakref list.
        (..=13, false) => (
            mem.read_u8(address.wrapping_add(32)).ok().map(|b| b != 0),
            None,
        ),
        // `rlock_owner` after the semaphore pointer (3.10–3.13).
        (..=13, true) => {
            let owner = mem.read_u64(address.wrapping_add(24)).ok();
            (owner.map(|o| o != 0), owner.filter(|&o| o != 0))
        }
        // PyMutex: bit 0 is "locked".
        (_, false) => (
            mem.read_u8(address.wrapping_add(HEAD))
                .ok()
                .map(|b| b & 1 != 0),
            None,
        ),
        // 3.14+: `_PyRecursiveMutex`: the mutex, then the owner's ident.
        (_, true) => {
            let owner = mem.read_u64(address.wrapping_add(24)).ok();
            (owner.map(|o| o != 0), owner.filter(|&o| o != 0))
        }
    };
    Some(LockWait {
        address,
        kind,
        locked,
        owner_ident,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::Garbage;

    /// Random words (many pointing back into the buffer) as the futex address, the stack and the
    /// objects: a lock or none, never a panic.
    #[test]
    fn garbage_memory_is_bounded() {
        let mut garbage = Garbage::new(0x051f_15ee_d0dd_ba11_u64);
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            let mem = garbage.buffer();
            for _ in 0..200 {
                let futex = Garbage::BASE + garbage.next_word() % Garbage::LEN;
                let sp = Garbage::BASE + garbage.next_word() % Garbage::LEN / 8 * 8;
                let _ = lock_waited(&mem, l, minor, futex, sp);
            }
        }
    }
}
