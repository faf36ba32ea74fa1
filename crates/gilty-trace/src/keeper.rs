//! The keeper: a small process that holds one "anchor" perf event per named probe and deletes the
//! probes once gilty is gone, however it went.
//!
//! A named probe's last perf event pays the slow unregister on close (~0.1 s, RCU grace periods;
//! see `tracefs.rs`). The anchors are those last events: gilty's per-thread events all close at
//! once, so the target's int3s go right after the report (or as the kernel closes a killed gilty's
//! fds), and the slow closes happen in the keeper, after gilty has exited. The anchors are opened
//! on the keeper itself, disabled: they never record, and the keeper never runs the probed code.
//!
//! Started by a double fork (so gilty never has to reap it), in its own session (a Ctrl-C meant for
//! gilty does not reach it). It only makes raw system calls on buffers prepared before the fork:
//! the parent is multi-threaded, so the child must not allocate or take locks. It watches a pipe
//! whose only write end gilty holds: end of file means gilty closed it (after closing its own
//! events) or died. It then closes the anchors and deletes the probes, retrying while the kernel
//! still calls them busy (a killed gilty's events are closed by the kernel as it exits, possibly
//! after the pipe), for at most `REMOVE_FOR`.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::attr::{self, PerfEventAttr};

/// How long the keeper retries deleting a probe the kernel calls busy.
const REMOVE_FOR_MS: u32 = 30_000;
const RETRY_MS: u32 = 10;

/// Gilty's end of the lifeline: dropping it tells the keeper to clean up.
pub(crate) struct Keeper {
    lifeline: OwnedFd,
    pub pid: i32,
    /// The keeper's pidfd: tells whether it is still there to delete the probes.
    pidfd: Option<OwnedFd>,
    root: PathBuf,
    remove_lines: Vec<String>,
}

impl Keeper {
    fn alive(&self) -> bool {
        let Some(fd) = &self.pidfd else { return false };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout. Readable = the process has exited.
        unsafe { libc::poll(&mut p, 1, 0) == 0 }
    }
}

impl Drop for Keeper {
    /// One byte before the end of file says "closed on purpose, my events are gone": the keeper
    /// need not wait for this process to exit. If the keeper was killed, its anchors are closed and
    /// the definitions are deleted here instead.
    fn drop(&mut self) {
        if self.alive() {
            // SAFETY: one byte from a constant to our own pipe fd.
            unsafe { libc::write(self.lifeline.as_raw_fd(), b"x".as_ptr().cast(), 1) };
            return;
        }
        for line in &self.remove_lines {
            let _ = crate::tracefs::command(&self.root, line.trim_end());
        }
    }
}

/// `enum perf_type_id`: `PERF_TYPE_TRACEPOINT = 2`.
pub(crate) const PERF_TYPE_TRACEPOINT: u32 = 2;

/// The attr of an anchor: a disabled counting event on tracepoint `id`.
pub(crate) fn anchor_attr(id: u64) -> PerfEventAttr {
    PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: attr::PERF_ATTR_SIZE_VER7,
        config: id,
        flags: attr::FLAG_DISABLED,
        ..Default::default()
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid out array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just created both fds.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Why there is no keeper, and whether one started anyway and will delete the probes itself.
pub(crate) struct StartError {
    pub message: String,
    pub keeper_removes: bool,
}

fn failed(message: String) -> StartError {
    StartError {
        message,
        keeper_removes: false,
    }
}

/// Starts the keeper for the probes with tracepoint `ids`, deleted at the end with `remove_lines`
/// (each "-:group/name\n"). Returns once the anchors are open.
pub(crate) fn start(
    root: &Path,
    ids: &[u64],
    remove_lines: &[String],
) -> Result<Keeper, StartError> {
    let attrs: Vec<PerfEventAttr> = ids.iter().map(|&id| anchor_attr(id)).collect();
    let events = CString::new(
        root.join("uprobe_events")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .map_err(|_| failed("tracefs path has a NUL".into()))?;
    let lines: Vec<&[u8]> = remove_lines.iter().map(|l| l.as_bytes()).collect();
    let mut anchors: Vec<RawFd> = vec![-1; attrs.len()];
    let owner = std::process::id() as libc::pid_t;
    let (life_r, life_w) = pipe().map_err(|e| failed(format!("pipe: {e}")))?;
    let (stat_r, stat_w) = pipe().map_err(|e| failed(format!("pipe: {e}")))?;
    // SAFETY: fork in a multi-threaded process; the children only make async-signal-safe system
    // calls on memory prepared above (see `keeper_main`) and end with _exit.
    let first = unsafe { libc::fork() };
    if first < 0 {
        return Err(failed(format!("fork: {}", std::io::Error::last_os_error())));
    }
    if first == 0 {
        unsafe {
            libc::setsid();
            let second = libc::fork();
            if second != 0 {
                libc::_exit(if second < 0 { 1 } else { 0 });
            }
            keeper_main(
                owner,
                life_r.as_raw_fd(),
                stat_w.as_raw_fd(),
                &attrs,
                &mut anchors,
                &events,
                &lines,
            )
        }
    }
    let mut st = 0;
    // SAFETY: reaping our own child, which exits right after its fork.
    unsafe { libc::waitpid(first, &mut st, 0) };
    drop(life_r);
    drop(stat_w);
    // The keeper writes [errno or 0, its pid] once the anchors are open, or dies (end of file).
    let mut buf = [0i32; 2];
    let n = loop {
        // SAFETY: reading into a local buffer of the given size.
        let n = unsafe {
            libc::read(
                stat_r.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        break n;
    };
    if n != std::mem::size_of_val(&buf) as isize {
        return Err(failed("the probe keeper process did not start".into()));
    }
    if buf[0] != 0 {
        let e = std::io::Error::from_raw_os_error(buf[0]);
        return Err(StartError {
            message: format!("the probe keeper could not open its events: {e}"),
            keeper_removes: true,
        });
    }
    // SAFETY: pidfd_open on the pid the keeper just reported; -1 (it already died) is handled as
    // dead.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, buf[1], 0) };
    // SAFETY: a new fd from the kernel, owned here.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) });
    Ok(Keeper {
        lifeline: life_w,
        pid: buf[1],
        pidfd,
        root: root.to_owned(),
        remove_lines: remove_lines.to_vec(),
    })
}

/// The keeper's whole life. Raw system calls only (see the module comment).
unsafe fn keeper_main(
    owner: libc::pid_t,
    life: RawFd,
    stat: RawFd,
    attrs: &[PerfEventAttr],
    anchors: &mut [RawFd],
    events: &CString,
    lines: &[&[u8]],
) -> ! {
    // Keep only the two pipe ends: gilty's stdout, sockets and perf fds must not stay open here.
    let (lo, hi) = (life.min(stat) as u32, life.max(stat) as u32);
    if lo > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, lo - 1, 0u32);
    }
    if hi > lo + 1 {
        libc::syscall(libc::SYS_close_range, lo + 1, hi - 1, 0u32);
    }
    libc::syscall(libc::SYS_close_range, hi + 1, u32::MAX, 0u32);
    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    libc::signal(libc::SIGHUP, libc::SIG_IGN);
    libc::signal(libc::SIGINT, libc::SIG_DFL);
    libc::signal(libc::SIGTERM, libc::SIG_DFL);
    libc::prctl(
        libc::PR_SET_NAME,
        c"gilty-keeper".as_ptr() as libc::c_ulong,
        0,
        0,
        0,
    );
    let mut err = 0;
    for (a, fd) in attrs.iter().zip(anchors.iter_mut()) {
        let r = libc::syscall(
            libc::SYS_perf_event_open,
            a as *const PerfEventAttr,
            0,
            -1,
            -1,
            attr::PERF_FLAG_FD_CLOEXEC,
        );
        if r < 0 {
            err = *libc::__errno_location();
            break;
        }
        *fd = r as RawFd;
    }
    let msg = [err, libc::getpid()];
    // Opened while gilty is surely alive (it waits for the status above), so it names gilty even if
    // its pid is reused later.
    let owner_fd = libc::syscall(libc::SYS_pidfd_open, owner, 0) as RawFd;
    libc::write(stat, msg.as_ptr().cast(), std::mem::size_of_val(&msg));
    libc::close(stat);
    if err == 0 {
        let mut b = [0u8; 16];
        let mut on_purpose = false;
        loop {
            let n = libc::read(life, b.as_mut_ptr().cast(), b.len());
            if n > 0 {
                on_purpose = true;
            }
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        // Gilty died: the kernel closes its fds (the pipe possibly first) before the exit is
        // signalled on the pidfd. Closing the anchors only then keeps gilty's closes the instant
        // ones.
        if !on_purpose && owner_fd >= 0 {
            let mut p = libc::pollfd {
                fd: owner_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            while libc::poll(&mut p, 1, REMOVE_FOR_MS as i32) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
    }
    for &fd in anchors.iter() {
        if fd >= 0 {
            libc::close(fd); // the slow one: the probe's last event
        }
    }
    {
        for line in lines {
            let mut waited = 0;
            loop {
                let fd = libc::open(
                    events.as_ptr(),
                    libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC,
                );
                let ok = fd >= 0
                    && libc::write(fd, line.as_ptr().cast(), line.len()) == line.len() as isize;
                let e = *libc::__errno_location();
                if fd >= 0 {
                    libc::close(fd);
                }
                if ok || e != libc::EBUSY || waited >= REMOVE_FOR_MS {
                    break;
                }
                let ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: RETRY_MS as libc::c_long * 1_000_000,
                };
                libc::nanosleep(&ts, std::ptr::null_mut());
                waited += RETRY_MS;
            }
        }
    }
    libc::_exit(0)
}
