//! The native stack of a thread blocked in a system call, without stopping it: its user stack
//! pointer and instruction pointer from `/proc/PID/task/TID/syscall`, its stack memory read after
//! that.
//!
//! Same moment: the thread's context-switch counts (`/proc/PID/task/TID/status`) are read before
//! the registers and again after the stack (and the Python stack read with it, by the caller); if
//! they did not move, the thread did not run in between, so registers, stack memory and Python
//! stack all describe the one moment it blocked. Only the stack pointer and instruction pointer are
//! known (bp 0: unknown); the frames from the system call wrapper up are unwound from their CFI,
//! with a frame pointer found on the stack for builds whose CFI needs one
//! (`ProcessUnwinder::unwind`).

use super::unwind::Regs;
use crate::process::memory::Memory;

/// Bytes of stack read above the stack pointer.
pub const STACK_BYTES: usize = 32 * 1024;

/// voluntary + nonvoluntary context switches of a thread, or None if it is gone.
pub fn switches(pid: i32, tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let mut total = 0;
    let mut found = 0;
    for line in text.lines() {
        if let Some(v) = line
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
        {
            total += v.trim().parse::<u64>().ok()?;
            found += 1;
        }
    }
    (found == 2).then_some(total)
}

/// (stack pointer, instruction pointer) of a thread blocked in a system call, from the text of its
/// `/proc/.../syscall` ("NR a1 a2 a3 a4 a5 a6 SP PC"); None for "running" or a thread not in a
/// call.
pub fn parse_syscall(text: &str) -> Option<(u64, u64)> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    if parts.len() != 9 {
        return None;
    }
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    Some((hex(parts[7])?, hex(parts[8])?))
}

/// A blocked thread's registers and stack copy, and its switch count before the reads (to compare
/// with one read after the caller's Python stack read).
pub struct BlockedStack {
    pub regs: Regs,
    pub stack: Vec<u8>,
    pub switches_before: u64,
}

/// Reads a blocked thread's stack. None when it is running, gone, or its stack cannot be read.
pub fn read_blocked(pid: i32, tid: i32, mem: &dyn Memory) -> Option<BlockedStack> {
    let switches_before = switches(pid, tid)?;
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    let (sp, ip) = parse_syscall(&text)?;
    let mut stack = vec![0u8; STACK_BYTES];
    // The copy may run past the stack's top (a thread's first pages): shrink until it reads.
    let mut len = STACK_BYTES;
    while len >= 512 {
        if mem.read(sp, &mut stack[..len]).is_ok() {
            stack.truncate(len);
            return Some(BlockedStack {
                regs: Regs { ip, sp, bp: 0 },
                stack,
                switches_before,
            });
        }
        len /= 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_syscall_file() {
        assert_eq!(parse_syscall("running\n"), None);
        assert_eq!(
            parse_syscall("230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffc5a1b2c30 0x7f1234567890\n"),
            Some((0x7ffc5a1b2c30, 0x7f1234567890))
        );
        assert_eq!(parse_syscall("-1 0x7ffc5a1b2c30 0x7f1234567890\n"), None);
    }

    #[test]
    fn own_threads_switches() {
        let me = std::process::id() as i32;
        let tid = unsafe { libc::gettid() };
        assert!(switches(me, tid).is_some());
        assert!(switches(me, -5).is_none());
    }
}
