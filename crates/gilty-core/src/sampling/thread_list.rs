//! The target's threads as the sampler knows them: the OS thread list, each thread's name (Python's
//! where it has one), and the interpreter's thread states matched to them.

use crate::interp::interpreter::Interpreter;
use crate::interp::threads::{python_threads, PyThread, TidResolver};
use crate::process::procfs;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the OS thread list and Python thread names are re-read.
const REFRESH_EVERY: Duration = Duration::from_millis(250);

#[derive(Default)]
pub(crate) struct ThreadList {
    pub tid_resolver: TidResolver,
    /// The OS threads as last listed.
    pub os_tids: Vec<i32>,
    /// Per OS thread, its name.
    pub names: HashMap<i32, String>,
    py_names: HashMap<u64, String>,
    last_refresh: Option<Instant>,
    /// States-only passes (the in-process monitor): the main interpreter and thread states as last
    /// read, and when. Re-read every `REFRESH_EVERY`, like the OS thread list they are matched
    /// with.
    thread_cache: Option<(Instant, u64, Vec<PyThread>)>,
}

/// Marks a thread without a Python thread state: from 3.14 CPython names OS threads after their
/// Python threads, and threads a library starts from one (a BLAS pool) inherit that name, so two
/// threads called "fft" would be the Python one and a native one.
pub(crate) const NATIVE_ONLY_SUFFIX: &str = " (native thread)";

fn native_only_name(comm: String, native: bool) -> String {
    if native {
        comm + NATIVE_ONLY_SUFFIX
    } else {
        comm
    }
}

impl ThreadList {
    pub fn name(&self, tid: i32) -> String {
        self.names.get(&tid).cloned().unwrap_or_default()
    }

    /// Re-reads the OS thread list and the names every `REFRESH_EVERY`, or at once when a Python
    /// thread's tid has no name yet. True when re-read (threads not listed are gone).
    pub fn refresh(&mut self, interp: &Interpreter, pythreads: &[PyThread]) -> bool {
        let now = Instant::now();
        let due = self
            .last_refresh
            .map(|t| now - t >= REFRESH_EVERY)
            .unwrap_or(true);
        let unknown_tid = pythreads
            .iter()
            .any(|t| t.tid.map(|x| !self.names.contains_key(&x)).unwrap_or(false));
        if !due && !unknown_tid {
            return false;
        }
        self.last_refresh = Some(now);
        if let Ok(t) = procfs::thread_ids(interp.pid) {
            self.os_tids = t;
        }
        if let Ok(n) = crate::interp::thread_names::python_thread_names(interp) {
            self.py_names = n;
        }
        let pid = interp.pid;
        self.names.retain(|tid, _| self.os_tids.contains(tid));
        // Only when every thread state's tid is known can a thread be said to have none.
        let all_matched = pythreads.iter().all(|p| p.tid.is_some());
        for &tid in &self.os_tids {
            let state = pythreads.iter().find(|p| p.tid == Some(tid));
            match state.and_then(|p| self.py_names.get(&p.ident)) {
                Some(n) => {
                    self.names.insert(tid, n.clone());
                }
                // A thread keeps the name it had: `threading` disappears during interpreter
                // shutdown.
                // ... but one first seen before its thread state existed is not native.
                None if self.names.contains_key(&tid) => {
                    if state.is_some() {
                        if let Some(n) = self.names.get_mut(&tid) {
                            if let Some(base) = n.strip_suffix(NATIVE_ONLY_SUFFIX) {
                                *n = base.to_string();
                            }
                        }
                    }
                }
                None => {
                    let comm = procfs::comm(pid, tid).unwrap_or_else(|| format!("thread-{tid}"));
                    let native = state.is_none() && all_matched && !pythreads.is_empty();
                    self.names.insert(tid, native_only_name(comm, native));
                }
            }
        }
        true
    }

    /// The main interpreter and every thread state: read each pass when stacks are walked (a walk
    /// needs the live thread state), else at most every `REFRESH_EVERY`. A states-only pass then
    /// reads only the GIL, the GC flag and the syscalls of threads without the GIL: the monitor's
    /// cost.
    pub fn interpreter_threads(
        &mut self,
        interp: &Interpreter,
        stacks: bool,
    ) -> std::io::Result<(u64, Vec<PyThread>)> {
        if !stacks {
            if let Some((at, main, threads)) = &self.thread_cache {
                if at.elapsed() < REFRESH_EVERY {
                    return Ok((*main, threads.clone()));
                }
            }
        }
        let main = interp
            .main_interp()
            .map_err(|e| std::io::Error::other(e.message))?;
        if self.os_tids.is_empty() {
            self.os_tids = procfs::thread_ids(interp.pid)?;
        }
        let threads = python_threads(interp, &mut self.tid_resolver, &self.os_tids)?;
        self.thread_cache = if stacks {
            None
        } else {
            Some((Instant::now(), main, threads.clone()))
        };
        Ok((main, threads))
    }
}
