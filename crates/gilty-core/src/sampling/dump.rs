//! `gilty dump`: one snapshot of every thread (state, syscall, stack), with what each is handling
//! and, when asked, its native stack, its frames' positions and their local variables.

use crate::interp::exceptions::handled_by_tid;
use crate::interp::frames::Frame;
use crate::interp::locals::{locals_for_threads, FrameLocals, Want};
use crate::interp::threads::unreadable;
use crate::native::MixedFrame;
use crate::sampling::sampler::{Sampler, ThreadSnapshot};
use std::time::Duration;

/// How long the native read waits for every thread's kernel sample.
const NATIVE_WAIT: Duration = Duration::from_millis(500);

/// The snapshot: its time on the sampler's clock and its threads.
pub struct Dump {
    pub t: f64,
    pub threads: Vec<DumpThread>,
}

/// A thread's mixed stack, innermost first, and why part of it is `[unknown]`, if it is.
pub struct NativeStack {
    pub frames: Vec<MixedFrame>,
    pub partial: Option<String>,
}

pub struct DumpThread {
    pub snapshot: ThreadSnapshot,
    /// Read: the exception being handled (None: none). Absent when it could not be read.
    pub handling: Option<Option<String>>,
    /// Asked for: the mixed stack, or why there is none.
    pub native: Option<Result<NativeStack, String>>,
    /// Asked for (locals or positions): per frame its variables and position, or why not read.
    pub frames: Option<Result<Vec<FrameLocals>, String>>,
}

/// Reads the snapshot: the native stacks first (when asked), then every thread's Python stack, then
/// the locals and positions of those stacks, then what each thread is handling (right after its
/// stack; a failed read leaves it unknown).
pub fn dump(s: &mut Sampler, want: Want, native: bool) -> crate::Result<Dump> {
    let pid = s.interp.pid;
    let mut mixed = if native {
        Some(s.native_snapshot(NATIVE_WAIT)?)
    } else {
        None
    };
    let snap = s.snapshot().map_err(|e| unreadable(pid, &e))?;
    let mut vars = if want.variables || want.positions {
        let stacks: Vec<(i32, &[Frame])> =
            snap.iter().map(|t| (t.tid, t.stack.as_slice())).collect();
        Some(locals_for_threads(&s.interp, &stacks, want).map_err(|e| unreadable(pid, &e))?)
    } else {
        None
    };
    let mut handled = handled_by_tid(&s.interp).unwrap_or_default();
    let t = s.elapsed();
    let threads = snap
        .into_iter()
        .map(|th| {
            let native = mixed.as_mut().map(|m| {
                match m.iter().position(|n| n.tid == th.tid) {
                    Some(i) => {
                        let nt = m.swap_remove(i);
                        let partial = nt.partial;
                        nt.stack.map(|frames| NativeStack { frames, partial })
                    }
                    // Started (or its tid was reused) after the native read went by.
                    None => Err("the thread was not there when the native stacks were read".into()),
                }
            });
            DumpThread {
                handling: handled.remove(&th.tid),
                native,
                frames: vars.as_mut().and_then(|v| v.remove(&th.tid)),
                snapshot: th,
            }
        })
        .collect();
    Ok(Dump { t, threads })
}
