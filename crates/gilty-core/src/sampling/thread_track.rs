//! What the sampler keeps of one thread from pass to pass (its open /proc files, its last state,
//! the stack it was blocked in), and the reads of a pass that use it: the syscall, the scheduler
//! counters, whether it has a CPU, whether it ran since it went idle, and whether its stack can be
//! kept rather than walked again.

use crate::process::procfs::{Schedstat, SchedstatReader, SyscallReader, SyscallState};
use crate::process::switches::{queued_behind_caller, SwitchesReader};
use crate::sampling::classify::{GilView, History, ThreadState};
use crate::sampling::cpu_wait::CpuWaitTrack;
use crate::sampling::stacks::Stack;

/// CPU time a woken thread must have had to count as past its syscall's return (a few µs of kernel
/// exit).
const RAN_AFTER_WAKE_NS: u64 = 2_000;

/// What a blocked thread looked like when last read, with its scheduling counters read just before
/// and the GIL's `switch_number` of that pass. Its stack is not walked again while either
/// - its counters stay the same: it has not run, so neither its syscall nor its stack can have
///   changed (neither is read again); or
/// - it still waits for the GIL and cannot have had it since: `switch_number` has not moved and it
///   is not the last holder, or it moved once, to another thread, and this one was not the last
///   holder when its stack was read (taking the GIL from another thread moves the counter, and so
///   does any thread taking it back from this one: a hold in between makes two changes). So it has
///   run no Python code. A GIL waiter wakes every switch interval to check, so its counters move
///   anyway; with many threads waiting, this is what spares walking all of them every pass.
struct Still {
    tstate: u64,
    sched: Option<Schedstat>,
    switch_number: u64,
    /// This thread was the GIL's last holder when its stack was read (it could retake the GIL
    /// without moving the counter).
    was_last_holder: bool,
    syscall: SyscallState,
    stack: Stack,
    top: Option<(u64, i64)>,
    /// Handling an exception when its stack was read (unchanged while the stack is).
    handling: Option<bool>,
}

pub(crate) struct Track {
    reader: Option<SyscallReader>,
    history: Option<History>,
    schedstat: Option<SchedstatReader>,
    /// CPU time when the thread was last seen going idle (constant while it stays blocked).
    idle_run_ns: Option<u64>,
    still: Option<Still>,
    /// States-only passes: the thread state and syscall last read (see `read`).
    last_wait: Option<(u64, SyscallState)>,
    /// Whether it has a CPU when runnable (see `cpu_wait`).
    cpu: CpuWaitTrack,
    /// Times switched out, read for a runnable thread without the GIL (see `process::switches`).
    switches: Option<SwitchesReader>,
}

/// The pass as one thread's reads need it.
pub(crate) struct ThreadPass<'a> {
    pub pid: i32,
    pub tid: i32,
    pub tstate: u64,
    pub holds: bool,
    /// Stacks are walked this pass (else states only).
    pub stacks: bool,
    pub gil: &'a GilView,
    /// The GIL's futex address range (a thread blocked there waits for the GIL).
    pub range: (u64, u64),
    pub now_ns: u64,
    pub period_ns: u64,
}

impl ThreadPass<'_> {
    fn gil_wait(&self, s: SyscallState) -> bool {
        matches!(s, SyscallState::Blocked { nr, arg0 }
            if nr == crate::process::syscalls::FUTEX && arg0 >= self.range.0 && arg0 < self.range.1)
    }
}

/// A stack kept from an earlier pass, and where its innermost frame stood.
pub(crate) type Kept = (Stack, Option<(u64, i64)>);

/// One thread's reads in one pass, before its stack is walked.
pub(crate) struct ThreadReads {
    pub syscall: SyscallState,
    pub sched: Option<Schedstat>,
    /// The stack kept from an earlier pass (and where its innermost frame stood), if still valid.
    pub kept: Option<Kept>,
    /// Whether the kept stack was handling an exception.
    pub kept_handling: Option<bool>,
    pub cpu_wait: bool,
    pub ran_since_idle: Option<bool>,
    pub history: Option<History>,
}

impl Track {
    pub fn open(pid: i32, tid: i32) -> Track {
        Track {
            reader: SyscallReader::open(pid, tid).ok(),
            history: None,
            schedstat: None,
            idle_run_ns: None,
            still: None,
            last_wait: None,
            cpu: CpuWaitTrack::default(),
            switches: None,
        }
    }

    /// Has been on a CPU most of the time since the last pass (see `cpu_wait`).
    pub fn busy(&self) -> bool {
        self.cpu.busy
    }

    /// The scheduler counters' reader (opened on first use; tried again while it fails).
    pub fn sched_reader(&mut self, pid: i32, tid: i32) -> Option<&mut SchedstatReader> {
        self.schedstat
            .get_or_insert_with_result(|| SchedstatReader::open(pid, tid))
    }

    /// The scheduler counters now.
    fn sched(&mut self, pid: i32, tid: i32) -> Option<Schedstat> {
        self.sched_reader(pid, tid).and_then(|r| r.read())
    }

    fn run_ns(&mut self, pid: i32, tid: i32) -> Option<u64> {
        self.schedstat
            .get_or_insert_with_result(|| SchedstatReader::open(pid, tid))
            .and_then(|r| r.run_ns())
    }

    fn read_syscall(&mut self) -> SyscallState {
        self.reader
            .as_mut()
            .map(|r| r.read())
            .unwrap_or(SyscallState::Unavailable)
    }

    /// The syscall, counters and kept stack of this pass, and what they say of the CPU.
    pub fn read(&mut self, p: &ThreadPass) -> ThreadReads {
        let (mut kept, mut syscall_now) = self.kept_gil_waiter(p);
        // Read each pass, before the syscall and the stack: the same counters next pass mean the
        // thread has not run since before they were read (see `Still`), and the same switch count
        // means it has not been switched in since it was last seen blocked (see `cpu_wait`). Not
        // for a GIL waiter still blocked where it was (found above): with many waiters that read
        // would be most of a pass, and its baseline from when it blocked stays valid until it
        // wakes.
        let sched = if kept.is_some() {
            None
        } else {
            self.sched(p.pid, p.tid)
        };
        // Not switched in since it was last seen blocked: its stack is unchanged. Its syscall file
        // is read all the same: it may have been woken and be waiting for a CPU (`cpu_wait`).
        if kept.is_none() && syscall_now.is_none() {
            if let (Some(st), Some(now)) = (&self.still, sched) {
                if st.tstate == p.tstate && st.sched == Some(now) {
                    kept = Some((st.stack.clone(), st.top));
                }
            }
        }
        // States only: a thread blocked on the GIL last pass is still waiting for it while the GIL
        // has not changed hands (taking it moves switch_number), so its syscall is not read again.
        if !p.stacks && !p.holds && p.tstate != 0 && syscall_now.is_none() {
            let unchanged = self
                .history
                .map(|h| h.switch_number == p.gil.switch_number)
                .unwrap_or(false);
            syscall_now = self
                .last_wait
                .filter(|&(ts, s)| unchanged && ts == p.tstate && p.gil_wait(s))
                .map(|(_, s)| s);
        }
        // A GIL holder is classified without its syscall: one read fewer on the busiest thread.
        let syscall = if p.holds {
            SyscallState::Running
        } else if let Some(s) = syscall_now {
            s
        } else {
            self.read_syscall()
        };
        if kept.is_none() {
            let unchanged = match (&self.still, sched) {
                (Some(st), Some(now)) => {
                    st.tstate == p.tstate && st.sched == Some(now) && st.syscall == syscall
                }
                _ => false,
            };
            kept = if unchanged {
                self.still.as_ref().map(|st| (st.stack.clone(), st.top))
            } else {
                None
            };
        }
        // Every kept stack is the one in `still`: so is whether it was handling an exception.
        let kept_handling = if kept.is_some() {
            self.still.as_ref().and_then(|st| st.handling)
        } else {
            None
        };
        let cpu_wait = self.cpu_wait(p, syscall, sched);
        let ran_since_idle = self.ran_since_idle(p, syscall, sched);
        ThreadReads {
            syscall,
            sched,
            kept,
            kept_handling,
            cpu_wait,
            ran_since_idle,
            history: self.history,
        }
    }

    /// A GIL waiter still blocked where its stack was read, that cannot have had the GIL since:
    /// its stack and where it stood, and its syscall (read once to check).
    fn kept_gil_waiter(&mut self, p: &ThreadPass) -> (Option<Kept>, Option<SyscallState>) {
        if !(p.stacks && !p.holds && p.tstate != 0) {
            return (None, None);
        }
        let waited = self.still.as_ref().filter(|st| {
            let changes = p.gil.switch_number.wrapping_sub(st.switch_number);
            st.tstate == p.tstate
                && p.gil_wait(st.syscall)
                && p.gil.last_holder != p.tstate
                && (changes == 0 || (changes == 1 && !st.was_last_holder))
        });
        let Some(st) = waited else {
            return (None, None);
        };
        let (stack, top, then) = (st.stack.clone(), st.top, st.syscall);
        let now = self.read_syscall();
        if now == then {
            (Some((stack, top)), Some(now))
        } else {
            (None, None)
        }
    }

    /// Runnable and waiting for a CPU (see `cpu_wait`).
    fn cpu_wait(
        &mut self,
        p: &ThreadPass,
        syscall: SyscallState,
        sched: Option<Schedstat>,
    ) -> bool {
        let runnable = p.holds || syscall == SyscallState::Running;
        let reading = match sched {
            Some(s) => Some(s),
            // Woken since the last pass: read now (a switch-in after the syscall read moves the
            // count, so this errs towards "has had a CPU").
            None if runnable => self.sched(p.pid, p.tid),
            None => None,
        };
        // Runnable without the GIL: off a CPU if switched out as often as in, the switch-in count
        // read after the switch-outs. Exact where the counters above lag a short preemption (a
        // thread woken, run a moment and preempted read as native: docs/states.md).
        let off_cpu = if runnable && !p.holds && p.tstate != 0 {
            let (pid, tid) = (p.pid, p.tid);
            let out = self
                .switches
                .get_or_insert_with_result(|| SwitchesReader::open(pid, tid))
                .and_then(|r| r.read());
            let switched_in = out.and_then(|_| self.schedstat.as_mut().and_then(|r| r.read()));
            match (out, switched_in) {
                (Some(out), Some(s))
                    if s.pcount > 0 && s.pcount == out && !queued_behind_caller(pid, tid) =>
                {
                    Some(s.pcount)
                }
                _ => None,
            }
        } else {
            None
        };
        self.cpu
            .observe_switches(reading, p.now_ns, p.period_ns, runnable, off_cpu)
    }

    /// Whether a thread idle in the last pass and running now has had a CPU since it woke (None:
    /// not such a thread, or not known). CPU time is read only at the edges: when a thread goes
    /// idle, and when one idle before runs.
    fn ran_since_idle(
        &mut self,
        p: &ThreadPass,
        syscall: SyscallState,
        sched: Option<Schedstat>,
    ) -> Option<bool> {
        let was_idle = self
            .history
            .map(|h| h.state == ThreadState::Idle)
            .unwrap_or(false);
        let blocked_not_gil =
            matches!(syscall, SyscallState::Blocked { .. }) && !p.gil_wait(syscall);
        if blocked_not_gil && !was_idle {
            self.idle_run_ns = match sched {
                Some(s) => Some(s.run_ns),
                None => self.run_ns(p.pid, p.tid),
            };
        } else if was_idle && !p.holds && syscall == SyscallState::Running && p.tstate != 0 {
            let now_ns = match sched {
                Some(s) => Some(s.run_ns),
                None => self.run_ns(p.pid, p.tid),
            };
            return match (self.idle_run_ns, now_ns) {
                (Some(then), Some(now)) => Some(now.saturating_sub(then) >= RAN_AFTER_WAKE_NS),
                _ => None,
            };
        }
        None
    }

    /// Keeps this pass's outcome for the next: the state, the syscall of a states-only pass, and
    /// the stack of a blocked thread.
    #[allow(clippy::too_many_arguments)] // one pass's facts of one thread, named at the call
    pub fn remember(
        &mut self,
        p: &ThreadPass,
        state: ThreadState,
        syscall: SyscallState,
        sched: Option<Schedstat>,
        stack: &Option<Stack>,
        top: Option<(u64, i64)>,
        handling: Option<bool>,
    ) {
        let (tstate, gil) = (p.tstate, p.gil);
        self.history = Some(History {
            state,
            switch_number: gil.switch_number,
            was_last_holder: tstate != 0 && gil.last_holder == tstate,
        });
        self.last_wait = if p.stacks {
            None
        } else {
            Some((tstate, syscall))
        };
        self.still = match (syscall, stack) {
            (SyscallState::Blocked { .. }, Some(stack)) => Some(Still {
                tstate,
                sched,
                switch_number: gil.switch_number,
                was_last_holder: gil.last_holder == tstate,
                syscall,
                stack: stack.clone(),
                top,
                handling,
            }),
            _ => None,
        };
    }
}

/// `Option::get_or_insert_with` for a constructor that can fail: tries again next time on failure.
pub(crate) trait GetOrInsertResult<T> {
    fn get_or_insert_with_result(
        &mut self,
        make: impl FnOnce() -> std::io::Result<T>,
    ) -> Option<&mut T>;
}

impl<T> GetOrInsertResult<T> for Option<T> {
    fn get_or_insert_with_result(
        &mut self,
        make: impl FnOnce() -> std::io::Result<T>,
    ) -> Option<&mut T> {
        if self.is_none() {
            *self = make().ok();
        }
        self.as_mut()
    }
}
