//! One traced thread's perf events: the probes ready to open for any thread, the slot holding a
//! thread's events and ring buffer, and opening them. Used by the tracer (attach, poll) and by its
//! worker (late threads, closing), neither of which imports the other for these.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::attr::{self, PerfEventAttr};
use crate::error::{permission_denied, TraceError};
use crate::ring::Ring;

/// One probe, ready to be opened for any thread.
pub(crate) struct Probe {
    pub(crate) attr: PerfEventAttr,
    /// Kept alive for `attr.config1`, which points at it.
    pub(crate) _path: CString,
    /// For each requested register, its index among the registers a sample carries (ascending bit
    /// order).
    pub(crate) reg_pos: Vec<usize>,
    /// How many registers a sample carries (popcount of `sample_regs_user`).
    pub(crate) nregs: usize,
    pub(crate) ret: bool,
    pub(crate) what: String,
}

/// One traced thread: its ring (owned by probe 0's event) and all its events.
pub(crate) struct ThreadSlot {
    pub(crate) ring: Ring,
    /// One fd per probe, in spec order; fds[0] owns the ring.
    pub(crate) fds: Vec<OwnedFd>,
    pub(crate) ids: Vec<u64>,
}

impl ThreadSlot {
    pub(crate) fn ring_fd(&self) -> RawFd {
        self.fds[0].as_raw_fd()
    }

    /// Enables return probes first, then entry probes (see the module comment).
    pub(crate) fn enable(&self, probes: &[Probe]) -> Result<(), TraceError> {
        for want_ret in [true, false] {
            for (p, fd) in probes.iter().zip(&self.fds) {
                if p.ret == want_ret {
                    attr::ioctl_enable(fd.as_raw_fd()).map_err(|e| {
                        TraceError::Io(format!("PERF_EVENT_IOC_ENABLE on {}: {e}", p.what))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Stops sampling at once (closing, which removes the uprobe, is slow; see `worker`).
    pub(crate) fn disable(&self) {
        for fd in &self.fds {
            let _ = attr::ioctl_disable(fd.as_raw_fd());
        }
    }
}

/// Opens every probe for `tid`, disabled, all writing to one ring. `None` if the thread is gone.
pub(crate) fn open_thread(
    probes: &[Probe],
    pages: usize,
    tid: i32,
) -> Result<Option<ThreadSlot>, TraceError> {
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(probes.len());
    let mut ids = Vec::with_capacity(probes.len());
    let mut ring = None;
    for p in probes {
        let fd = match attr::perf_event_open(&p.attr, tid, -1) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(attr::open_error(&e, &p.what)),
        };
        match &ring {
            None => {
                ring = Some(Ring::map(fd.as_raw_fd(), pages).map_err(
                    |e| match e.raw_os_error() {
                        Some(libc::EPERM) | Some(libc::EACCES) => permission_denied(
                            "mmap perf ring buffers (or kernel.perf_event_mlock_kb is too small)",
                        ),
                        _ => TraceError::Io(format!(
                            "mmap of the perf ring buffer for thread {tid}: {e}"
                        )),
                    },
                )?);
            }
            Some(_) => attr::ioctl_set_output(fd.as_raw_fd(), fds[0].as_raw_fd()).map_err(|e| {
                TraceError::Io(format!("PERF_EVENT_IOC_SET_OUTPUT for {}: {e}", p.what))
            })?,
        }
        ids.push(
            attr::ioctl_id(fd.as_raw_fd())
                .map_err(|e| TraceError::Io(format!("PERF_EVENT_IOC_ID for {}: {e}", p.what)))?,
        );
        fds.push(fd);
    }
    Ok(Some(ThreadSlot {
        ring: ring.expect("at least one probe"),
        fds,
        ids,
    }))
}

pub(crate) fn list_tids(pid: i32) -> Option<Vec<i32>> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
