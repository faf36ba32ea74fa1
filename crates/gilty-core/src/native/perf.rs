//! On-CPU samples of the target's threads taken by the kernel: one `perf_event_open` per thread, a
//! task-clock event (it only runs while the thread does) whose samples carry the user registers and
//! a
//! copy of the user stack (`PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER`) and a CLOCK_MONOTONIC time.
//! The target is never stopped: the kernel copies the stack at the timer interrupt.

use gilty_trace::attr::{self, PerfEventAttr};
use gilty_trace::ring::Ring;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::unwind::Regs;

/// `PERF_COUNT_SW_TASK_CLOCK` (enum perf_sw_ids).
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
/// `PERF_SAMPLE_STACK_USER = 1U << 13` — `{ u64 size; char data[size]; u64 dyn_size; }`.
const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
/// `exclude_kernel` and `exclude_callchain_kernel` are not needed: user registers are recorded
/// either way.
const FLAG_EXCLUDE_KERNEL: u64 = attr::FLAG_EXCLUDE_KERNEL;
/// `enum perf_event_x86_regs`: BP = 6, SP = 7, IP = 8 (arch/x86/include/uapi/asm/perf_regs.h).
const REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);
/// Ring data pages per thread (power of two): room for several stack copies between drains.
const RING_PAGES: usize = 64;

/// Bytes of user stack the kernel copies per sample (must be a multiple of 8, at most 65528): the
/// most, as a NumPy ufunc in OpenBLAS's dgemm takes more than 32 KiB below its Python frame.
pub const DEFAULT_STACK_BYTES: u32 = 65528;

#[derive(Debug, Clone)]
pub struct PerfSample {
    pub tid: i32,
    /// CLOCK_MONOTONIC ns.
    pub time_ns: u64,
    pub regs: Regs,
    /// The copied stack, starting at `regs.sp`.
    pub stack: Vec<u8>,
}

/// Why sampling could not start: a one-line message saying what to change.
pub fn permission_hint(err: &io::Error) -> String {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf events are not permitted (kernel.perf_event_paranoid={paranoid}): run as root, grant CAP_PERFMON, or set `sysctl kernel.perf_event_paranoid=1`; in a container, allow perf_event_open in its seccomp profile"
        ),
        Some(libc::ENOENT) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            format!("this kernel has no perf events for user stacks ({err}): it needs CONFIG_PERF_EVENTS and CONFIG_HAVE_PERF_USER_STACK_DUMP")
        }
        _ => format!("perf_event_open failed: {err}"),
    }
}

struct ThreadEvent {
    _fd: OwnedFd,
    ring: Ring,
}

/// Per-thread task-clock events of one process.
pub struct PerfSampler {
    period_ns: u64,
    stack_bytes: u32,
    exclude_kernel: bool,
    threads: HashMap<i32, ThreadEvent>,
    /// Records the kernel dropped (ring full).
    pub lost: u64,
}

fn sample_attr(period_ns: u64, stack_bytes: u32, exclude_kernel: bool) -> PerfEventAttr {
    let mut a = PerfEventAttr {
        type_: attr::PERF_TYPE_SOFTWARE,
        size: attr::PERF_ATTR_SIZE_VER7,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: period_ns,
        sample_type: attr::PERF_SAMPLE_TID
            | attr::PERF_SAMPLE_TIME
            | attr::PERF_SAMPLE_REGS_USER
            | PERF_SAMPLE_STACK_USER,
        flags: attr::FLAG_USE_CLOCKID,
        // No wake-up per sample: nothing polls these events (the sampler drains the rings each
        // pass), and each wake-up is an interrupt's work in the sampled thread. 0: the kernel's
        // default watermark, half the ring.
        wakeup_events: 0,
        sample_regs_user: REGS_MASK,
        sample_stack_user: stack_bytes,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    if exclude_kernel {
        a.flags |= FLAG_EXCLUDE_KERNEL | attr::FLAG_EXCLUDE_HV;
    }
    a
}

impl PerfSampler {
    /// Checks that a sampling event can be opened on `tid` (one line saying what to change if not).
    pub fn new(period_ns: u64, stack_bytes: u32) -> PerfSampler {
        PerfSampler {
            period_ns: period_ns.max(10_000),
            stack_bytes: stack_bytes.min(65528) & !7,
            exclude_kernel: false,
            threads: HashMap::new(),
            lost: 0,
        }
    }

    /// Starts sampling `tid` (no-op if already). An error other than the thread's exit is a
    /// permission or kernel problem, for `permission_hint`.
    pub fn add_thread(&mut self, tid: i32) -> io::Result<()> {
        if self.threads.contains_key(&tid) {
            return Ok(());
        }
        let fd = match attr::perf_event_open(
            &sample_attr(self.period_ns, self.stack_bytes, self.exclude_kernel),
            tid,
            -1,
        ) {
            Ok(fd) => fd,
            // Unprivileged under perf_event_paranoid 2 may still sample user mode only.
            Err(e)
                if !self.exclude_kernel
                    && matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) =>
            {
                self.exclude_kernel = true;
                attr::perf_event_open(
                    &sample_attr(self.period_ns, self.stack_bytes, true),
                    tid,
                    -1,
                )?
            }
            Err(e) => return Err(e),
        };
        let ring = Ring::map(fd.as_raw_fd(), RING_PAGES)?;
        self.threads.insert(tid, ThreadEvent { _fd: fd, ring });
        Ok(())
    }

    /// Stops sampling threads not in `alive`.
    pub fn retain(&mut self, alive: &[i32]) {
        self.threads.retain(|tid, _| alive.contains(tid));
    }

    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Every sample written since the last drain, in ring order per thread.
    pub fn drain(&mut self, out: &mut Vec<PerfSample>) {
        let mut lost = 0;
        for ev in self.threads.values_mut() {
            ev.ring.drain(|rtype, rec| match rtype {
                attr::PERF_RECORD_SAMPLE => {
                    if let Some(s) = parse_sample(rec) {
                        out.push(s);
                    }
                }
                attr::PERF_RECORD_LOST => {
                    lost += rec
                        .get(16..24)
                        .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                        .unwrap_or(0)
                }
                _ => {}
            });
        }
        self.lost += lost;
    }
}

/// A `PERF_RECORD_SAMPLE` with `TID | TIME | REGS_USER (bp, sp, ip) | STACK_USER`, header included.
pub fn parse_sample(rec: &[u8]) -> Option<PerfSample> {
    let u64_at = |off: usize| {
        rec.get(off..off + 8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
    };
    let tid = rec
        .get(12..16)
        .map(|b| i32::from_ne_bytes(b.try_into().unwrap()))?;
    let time_ns = u64_at(16)?;
    let abi = u64_at(24)?;
    let mut off = 32;
    if abi == attr::PERF_SAMPLE_REGS_ABI_NONE {
        return None; // no user context (a kernel thread)
    }
    let regs = Regs {
        bp: u64_at(off)?,
        sp: u64_at(off + 8)?,
        ip: u64_at(off + 16)?,
    };
    off += 24;
    let size = u64_at(off)? as usize;
    off += 8;
    if size == 0 {
        return Some(PerfSample {
            tid,
            time_ns,
            regs,
            stack: Vec::new(),
        });
    }
    let dyn_size = u64_at(off + size)? as usize;
    let stack = rec.get(off..off + size.min(dyn_size))?.to_vec();
    Some(PerfSample {
        tid,
        time_ns,
        regs,
        stack,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_sample_record() {
        let mut rec = vec![0u8; 8];
        rec[0..4].copy_from_slice(&attr::PERF_RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&77i32.to_ne_bytes()); // pid
        rec.extend_from_slice(&78i32.to_ne_bytes()); // tid
        rec.extend_from_slice(&123u64.to_ne_bytes()); // time
        rec.extend_from_slice(&2u64.to_ne_bytes()); // abi 64
        for r in [0xb0u64, 0x5000, 0x1234] {
            rec.extend_from_slice(&r.to_ne_bytes());
        }
        rec.extend_from_slice(&16u64.to_ne_bytes()); // size
        rec.extend_from_slice(&[7u8; 16]);
        rec.extend_from_slice(&8u64.to_ne_bytes()); // dyn_size: only 8 valid
        let s = parse_sample(&rec).unwrap();
        assert_eq!((s.tid, s.time_ns), (78, 123));
        assert_eq!(
            s.regs,
            Regs {
                ip: 0x1234,
                sp: 0x5000,
                bp: 0xb0
            }
        );
        assert_eq!(s.stack, vec![7u8; 8]);
        // Truncated record.
        assert!(parse_sample(&rec[..40]).is_none());
    }

    #[test]
    fn a_refusal_says_what_to_change() {
        for errno in [libc::EACCES, libc::EPERM] {
            let hint = permission_hint(&io::Error::from_raw_os_error(errno));
            assert!(
                hint.contains("perf_event_paranoid")
                    && hint.contains("CAP_PERFMON")
                    && hint.contains("root"),
                "{hint}"
            );
            assert!(!hint.contains('\n'));
        }
        assert!(permission_hint(&io::Error::from_raw_os_error(libc::ENOENT))
            .contains("CONFIG_PERF_EVENTS"));
    }

    #[test]
    fn samples_a_spinning_thread_of_this_process() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            let mut x = 0u64;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        let tid = rx.recv().unwrap();
        let mut p = PerfSampler::new(1_000_000, 4096);
        match p.add_thread(tid) {
            Ok(()) => {}
            Err(e) => {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                h.join().unwrap();
                eprintln!("skipped: {}", permission_hint(&e));
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut out = Vec::new();
        p.drain(&mut out);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        assert!(out.len() >= 5, "{} samples", out.len());
        assert!(out
            .iter()
            .all(|s| s.tid == tid && s.regs.sp != 0 && !s.stack.is_empty()));
    }
}
