//! Deciding one thread's state in one sample from what was read: the GIL struct, the GC flag, and
//! the syscall the thread is blocked in. Pure functions, so every rule is unit-tested.

use crate::process::procfs::SyscallState;
use crate::process::syscalls::FUTEX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ThreadState {
    HoldingGil = 0,
    Gc = 1,
    WaitingGil = 2,
    Native = 3,
    Idle = 4,
    Unknown = 5,
    /// Runnable, on a run queue, waiting for a CPU (the host or its cgroup has none to give it).
    CpuWait = 6,
}

impl ThreadState {
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::HoldingGil => "holding_gil",
            ThreadState::Gc => "gc",
            ThreadState::WaitingGil => "waiting_gil",
            ThreadState::Native => "native",
            ThreadState::Idle => "idle",
            ThreadState::Unknown => "unknown",
            ThreadState::CpuWait => "cpu_wait",
        }
    }
}

/// The GIL as read once per sample (struct _gil_runtime_state).
#[derive(Debug, Clone, Copy, Default)]
pub struct GilView {
    pub locked: bool,
    pub last_holder: u64,
    pub switch_number: u64,
    /// Tids owning the GIL's `mutex` and `switch_mutex` (-1: free or unknown).
    pub mutex_owners: [i32; 2],
}

/// What the previous sample concluded about a thread.
#[derive(Debug, Clone, Copy)]
pub struct History {
    pub state: ThreadState,
    pub switch_number: u64,
    /// The GIL's last holder was this thread: a retake by it would not move `switch_number`.
    pub was_last_holder: bool,
}

pub struct Observation {
    /// The thread's PyThreadState address; 0 for threads without one.
    pub tstate: u64,
    pub syscall: SyscallState,
    /// The thread is in the eval loop itself, not in C code: its innermost frame stands on an
    /// instruction whose only way to be without the GIL is the eval breaker's handoff (a backward
    /// jump or RESUME: see `gilty_layouts::handoff_opcodes`), or (3.10) its recursion counter shows
    /// no C call in progress.
    pub in_handoff: bool,
    /// For a thread running now that was idle in the previous pass: whether it has had a CPU since
    /// it went idle (its CPU time grew). None when not asked or unknown.
    pub ran_since_idle: Option<bool>,
    /// From the thread's scheduler counters: it is runnable and this pass goes to waiting for a CPU
    /// (see `sampler::CpuWaitTrack`). Applies only to a thread not blocked in a syscall.
    pub cpu_wait: bool,
    /// The thread owns the GIL's `mutex` or `switch_mutex`: it is inside take_gil() or drop_gil().
    pub owns_gil_mutex: bool,
    /// 3.15+: the thread state's own `gil_requested` (it is inside take_gil); None before 3.15.
    pub gil_requested: Option<bool>,
}

/// Classifies one thread. `futex_range` is [start, end) of the GIL struct's condition variables and
/// mutexes.
pub fn classify(
    obs: &Observation,
    gil: &GilView,
    gc_collecting: bool,
    futex_range: (u64, u64),
    prev: Option<History>,
) -> ThreadState {
    let holds = obs.tstate != 0 && gil.locked && gil.last_holder == obs.tstate;
    // A runnable thread without a CPU runs nothing: not Python, not C, not take_gil. (A holder is
    // runnable: it is classified without its syscall.)
    if obs.cpu_wait && (holds || obs.syscall == SyscallState::Running) {
        return ThreadState::CpuWait;
    }
    if holds {
        return if gc_collecting {
            ThreadState::Gc
        } else {
            ThreadState::HoldingGil
        };
    }
    match obs.syscall {
        SyscallState::Blocked { nr, arg0 }
            if nr == FUTEX && arg0 >= futex_range.0 && arg0 < futex_range.1 =>
        {
            ThreadState::WaitingGil
        }
        SyscallState::Blocked { .. } => ThreadState::Idle,
        SyscallState::Unavailable => ThreadState::Unknown,
        SyscallState::Running => {
            // 3.15+: the interpreter itself says the thread is inside take_gil (running there:
            // woken and re-checking the GIL, or not yet scheduled since it was woken).
            if obs.gil_requested == Some(true) && obs.tstate != 0 {
                return ThreadState::WaitingGil;
            }
            // Holding the GIL's own mutex without the GIL: between the futex and the GIL in
            // take_gil(), or handing the GIL over in drop_gil(). No C code of the program runs
            // there.
            if obs.owns_gil_mutex && obs.tstate != 0 {
                return ThreadState::WaitingGil;
            }
            // A waiter woken by drop_gil is "running" before it is scheduled and re-checks the GIL.
            // It cannot have taken the GIL since the last sample unless the GIL changed hands to
            // it: take_gil bumps switch_number whenever the holder changes. No change, or one
            // change that went to another thread, means it is still inside take_gil.
            if let Some(h) = prev {
                // The counter does not move when the last holder takes the GIL back, so a thread
                // that is itself the last holder may have re-taken it unseen: not a waiter then.
                if h.state == ThreadState::WaitingGil
                    && obs.tstate != 0
                    && gil.last_holder != obs.tstate
                {
                    let changes = gil.switch_number.wrapping_sub(h.switch_number);
                    if changes <= 1 {
                        return ThreadState::WaitingGil;
                    }
                }
            }
            // Woken from a blocking call (idle in the previous pass), without the GIL, and it has
            // had a CPU since: the C code that blocked goes straight back to take_gil, so it is
            // waiting there. Not yet had a CPU: it is still on its way out of the syscall (not a
            // GIL wait).
            if let (Some(h), Some(true)) = (prev, obs.ran_since_idle) {
                if h.state == ThreadState::Idle
                    && !h.was_last_holder
                    && obs.tstate != 0
                    && gil.last_holder != obs.tstate
                    && gil.switch_number.wrapping_sub(h.switch_number) <= 1
                {
                    return ThreadState::WaitingGil;
                }
            }
            // Running without the GIL in the eval loop, not in C code: drop_gil/take_gil from the
            // eval breaker (a forced switch).
            if obs.tstate != 0 && obs.in_handoff {
                return ThreadState::WaitingGil;
            }
            ThreadState::Native
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u64 = 0x1000;
    const OTHER: u64 = 0x2000;
    const RANGE: (u64, u64) = (0x5020, 0x50d0);

    fn obs(syscall: SyscallState) -> Observation {
        Observation {
            tstate: ME,
            syscall,
            in_handoff: false,
            ran_since_idle: None,
            cpu_wait: false,
            owns_gil_mutex: false,
            gil_requested: None,
        }
    }
    fn gil(locked: bool, holder: u64, sw: u64) -> GilView {
        GilView {
            locked,
            last_holder: holder,
            switch_number: sw,
            mutex_owners: [-1, -1],
        }
    }

    /// 3.15's `gil_requested` settles the running-without-the-GIL case: in take_gil, not native
    /// code.
    #[test]
    fn requested_gil_is_a_wait() {
        let mut o = obs(SyscallState::Running);
        o.gil_requested = Some(true);
        assert_eq!(
            classify(&o, &gil(true, OTHER, 1), false, RANGE, None),
            ThreadState::WaitingGil
        );
        o.gil_requested = Some(false);
        assert_eq!(
            classify(&o, &gil(true, OTHER, 1), false, RANGE, None),
            ThreadState::Native
        );
        // The holder is the holder whatever the flag says (it is set and cleared around the
        // handoff).
        o.gil_requested = Some(true);
        assert_eq!(
            classify(&o, &gil(true, ME, 1), false, RANGE, None),
            ThreadState::HoldingGil
        );
    }

    #[test]
    fn holder_is_holding_or_gc() {
        let o = obs(SyscallState::Running);
        assert_eq!(
            classify(&o, &gil(true, ME, 1), false, RANGE, None),
            ThreadState::HoldingGil
        );
        assert_eq!(
            classify(&o, &gil(true, ME, 1), true, RANGE, None),
            ThreadState::Gc
        );
        // last_holder stays set after drop_gil: unlocked means nobody holds it.
        assert_eq!(
            classify(&o, &gil(false, ME, 1), false, RANGE, None),
            ThreadState::Native
        );
    }

    #[test]
    fn futex_on_gil_is_waiting_other_futex_is_idle() {
        let g = gil(true, OTHER, 1);
        let w = obs(SyscallState::Blocked {
            nr: FUTEX,
            arg0: 0x5048,
        });
        assert_eq!(
            classify(&w, &g, false, RANGE, None),
            ThreadState::WaitingGil
        );
        let lock = obs(SyscallState::Blocked {
            nr: FUTEX,
            arg0: 0x9000,
        });
        assert_eq!(classify(&lock, &g, false, RANGE, None), ThreadState::Idle);
        let sleep = obs(SyscallState::Blocked { nr: 230, arg0: 1 });
        assert_eq!(classify(&sleep, &g, false, RANGE, None), ThreadState::Idle);
        assert_eq!(
            classify(&obs(SyscallState::Unavailable), &g, false, RANGE, None),
            ThreadState::Unknown
        );
    }

    #[test]
    fn woken_waiter_stays_waiting_until_it_could_have_taken_the_gil() {
        let run = obs(SyscallState::Running);
        let prev = Some(History {
            state: ThreadState::WaitingGil,
            switch_number: 7,
            was_last_holder: false,
        });
        // No handoff since: still in take_gil.
        assert_eq!(
            classify(&run, &gil(true, OTHER, 7), false, RANGE, prev),
            ThreadState::WaitingGil
        );
        // One handoff, to another thread: still waiting.
        assert_eq!(
            classify(&run, &gil(true, OTHER, 8), false, RANGE, prev),
            ThreadState::WaitingGil
        );
        // One handoff to this thread, now released: it ran Python and went native.
        assert_eq!(
            classify(&run, &gil(false, ME, 8), false, RANGE, prev),
            ThreadState::Native
        );
        // Two or more handoffs: it may have had the GIL; native.
        assert_eq!(
            classify(&run, &gil(true, OTHER, 9), false, RANGE, prev),
            ThreadState::Native
        );
        // It is the last holder and the counter did not move: it may have re-taken the GIL unseen.
        assert_eq!(
            classify(&run, &gil(false, ME, 7), false, RANGE, prev),
            ThreadState::Native
        );
        // Not waiting before: running without the GIL is native.
        let prev_idle = Some(History {
            state: ThreadState::Idle,
            switch_number: 7,
            was_last_holder: false,
        });
        assert_eq!(
            classify(&run, &gil(true, OTHER, 7), false, RANGE, prev_idle),
            ThreadState::Native
        );
    }

    #[test]
    fn woken_from_idle_and_ran_is_waiting_until_it_had_the_gil() {
        let prev = Some(History {
            state: ThreadState::Idle,
            switch_number: 7,
            was_last_holder: false,
        });
        let ran = Observation {
            ran_since_idle: Some(true),
            ..obs(SyscallState::Running)
        };
        let not_yet = Observation {
            ran_since_idle: Some(false),
            ..ran
        };
        assert_eq!(
            classify(&ran, &gil(true, OTHER, 8), false, RANGE, prev),
            ThreadState::WaitingGil
        );
        // Still on its way out of the syscall: not a GIL wait.
        assert_eq!(
            classify(&not_yet, &gil(true, OTHER, 8), false, RANGE, prev),
            ThreadState::Native
        );
        // It had the GIL since (it is the last holder): native code after releasing it.
        assert_eq!(
            classify(&ran, &gil(false, ME, 8), false, RANGE, prev),
            ThreadState::Native
        );
        // Two or more handoffs since: it may have had the GIL.
        assert_eq!(
            classify(&ran, &gil(true, OTHER, 9), false, RANGE, prev),
            ThreadState::Native
        );
        // It was the last holder when it went idle: it may have retaken the GIL without moving the
        // counter, then another thread took it (one change): it may have had the GIL.
        let prev_mine = Some(History {
            state: ThreadState::Idle,
            switch_number: 7,
            was_last_holder: true,
        });
        assert_eq!(
            classify(&ran, &gil(true, OTHER, 8), false, RANGE, prev_mine),
            ThreadState::Native
        );
    }

    #[test]
    fn running_without_gil_on_a_backward_jump_is_the_handoff() {
        let prev = Some(History {
            state: ThreadState::HoldingGil,
            switch_number: 7,
            was_last_holder: true,
        });
        let at_jump = Observation {
            in_handoff: true,
            ..obs(SyscallState::Running)
        };
        assert_eq!(
            classify(&at_jump, &gil(true, OTHER, 8), false, RANGE, prev),
            ThreadState::WaitingGil
        );
        // A thread without a Python frame cannot be in the eval loop's handoff.
        let no_ts = Observation {
            tstate: 0,
            in_handoff: true,
            ..obs(SyscallState::Running)
        };
        assert_eq!(
            classify(&no_ts, &gil(true, OTHER, 8), false, RANGE, prev),
            ThreadState::Native
        );
    }

    #[test]
    fn runnable_without_a_cpu_is_cpu_wait_whatever_it_holds() {
        let g = gil(true, ME, 7);
        let waiting = Observation {
            cpu_wait: true,
            ..obs(SyscallState::Running)
        };
        // The holder, a thread running without the GIL, a C thread: none runs without a CPU.
        assert_eq!(
            classify(&waiting, &g, false, RANGE, None),
            ThreadState::CpuWait
        );
        assert_eq!(
            classify(&waiting, &g, true, RANGE, None),
            ThreadState::CpuWait
        );
        assert_eq!(
            classify(&waiting, &gil(true, OTHER, 7), false, RANGE, None),
            ThreadState::CpuWait
        );
        let prev = Some(History {
            state: ThreadState::WaitingGil,
            switch_number: 7,
            was_last_holder: false,
        });
        assert_eq!(
            classify(&waiting, &gil(true, OTHER, 7), false, RANGE, prev),
            ThreadState::CpuWait
        );
        // A thread blocked in a syscall is not runnable: the flag cannot apply.
        let blocked = Observation {
            cpu_wait: true,
            ..obs(SyscallState::Blocked { nr: 230, arg0: 1 })
        };
        assert_eq!(
            classify(&blocked, &gil(true, OTHER, 7), false, RANGE, None),
            ThreadState::Idle
        );
    }

    #[test]
    fn owner_of_the_gil_mutex_without_the_gil_is_in_the_handoff() {
        let inside = Observation {
            owns_gil_mutex: true,
            ..obs(SyscallState::Running)
        };
        assert_eq!(
            classify(&inside, &gil(false, OTHER, 7), false, RANGE, None),
            ThreadState::WaitingGil
        );
        assert_eq!(
            classify(
                &obs(SyscallState::Running),
                &gil(false, OTHER, 7),
                false,
                RANGE,
                None
            ),
            ThreadState::Native
        );
        // The holder owns it briefly too (taking or dropping): it holds the GIL.
        assert_eq!(
            classify(&inside, &gil(true, ME, 7), false, RANGE, None),
            ThreadState::HoldingGil
        );
    }
}
