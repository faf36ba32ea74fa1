//! Watching a live process: sample where each running thread's innermost frame stands
//! (time-weighted down to the instruction), and re-read the hot code objects' adaptive bytecode
//! every so often to follow each site's form, counter and specialization over time. Read-only
//! throughout.

use super::code::{read_adaptive_checked, read_identity, CodeIdentity};
use super::decode::{decode, Form, Instruction};
use crate::interp::frames::FrameWalker;
use crate::interp::interpreter::Interpreter;
use crate::interp::threads::{python_threads, TidResolver};
use crate::process::procfs::{self, SchedstatReader};
use gilty_layouts::opcodes::OpcodeTable;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    pub duration: Duration,
    /// Samples of every thread per second.
    pub rate_hz: f64,
    /// How often the hot code objects are re-read.
    pub read_interval: Duration,
    /// Most code objects followed (the hottest by samples so far).
    pub max_codes: usize,
}

/// How one site behaved over the reads.
#[derive(Debug, Clone, Default)]
pub struct SiteHistory {
    pub reads: u32,
    /// Reads per form name.
    pub forms: BTreeMap<&'static str, u32>,
    /// Reads per opcode name seen.
    pub names: BTreeMap<&'static str, u32>,
    /// Reads per specialization in place (opcode + cache contents).
    pub specializations: HashMap<u64, u32>,
    /// Misses read from counter decrements between consecutive reads of one specialization (a lower
    /// bound: a counter that ran down and restarted between two reads is counted as a change only).
    pub counted_misses: u64,
    /// Consecutive reads whose specialization changed (re-specialized or de-specialized).
    pub changes: u32,
    /// Reads taken while no running thread's innermost frame stood in this code object (in the
    /// sampling pass just before): the site then holds the state its last execution left, so these
    /// reads weigh its states per call boundary rather than by the time each state lasts.
    pub rest_reads: u32,
    /// Of those, the reads that found a specialization in place.
    pub rest_specialized: u32,
    /// The other reads at rest, per counter value. On 3.11 each value of an adaptive run marks one
    /// execution of it, so the values seen show whether the reads met only some of those executions
    /// (a target feeding the site a fixed pattern in calls of a fixed length).
    pub rest_generic_values: BTreeMap<u16, u32>,
    last: Option<(Option<u64>, u16)>,
}

impl SiteHistory {
    fn observe(&mut self, ins: &Instruction, shift: u8, at_rest: bool) {
        let (Some(form), Some(counter)) = (ins.form, ins.counter) else {
            return;
        };
        self.reads += 1;
        if at_rest {
            self.rest_reads += 1;
            self.rest_specialized += (form == Form::Specialized) as u32;
            if form != Form::Specialized {
                *self.rest_generic_values.entry(counter.value).or_default() += 1;
            }
        }
        *self.forms.entry(form.as_str()).or_default() += 1;
        *self.names.entry(ins.name).or_default() += 1;
        let fp = ins.fingerprint();
        if let Some(f) = fp {
            *self.specializations.entry(f).or_default() += 1;
        }
        if let Some((last_fp, last_word)) = self.last {
            if last_fp != fp {
                self.changes += 1;
            } else if fp.is_some() {
                let (a, b) = (last_word >> shift, counter.word >> shift);
                if b < a {
                    self.counted_misses += (a - b) as u64;
                } else if b > a {
                    self.changes += 1; // restarted at the same specialization
                }
            }
        }
        self.last = Some((fp, counter.word));
    }
}

/// One followed code object.
pub struct WatchedCode {
    pub identity: CodeIdentity,
    /// Samples whose innermost frame stood in this code object, per instruction unit.
    pub samples_by_unit: HashMap<usize, u64>,
    pub samples: u64,
    /// The latest decoded instructions (None until the first successful read).
    pub last: Option<Vec<Instruction>>,
    /// Per site (by byte offset).
    pub sites: BTreeMap<u32, SiteHistory>,
    pub reads: u32,
    /// The address stopped holding this code object during the run.
    pub gone: bool,
}

pub struct WatchReport {
    pub passes: u64,
    /// Thread samples taken while the thread was on a CPU, held the GIL and stood in a Python
    /// frame: it was running Python (the only samples that count).
    pub running_samples: u64,
    /// Thread samples of threads on a CPU (or runnable) that did not hold the GIL: in C code that
    /// released it (a socket send, a wait about to park) or waiting for it. Left out.
    pub without_gil_samples: u64,
    /// Thread samples taken in all (idle threads included).
    pub thread_samples: u64,
    pub read_passes: u64,
    /// Read passes left out because the target had not run since the previous one (see `watch`).
    pub idle_read_passes: u64,
    pub elapsed_s: f64,
    /// Time spent reading the target (sampling and code reads), seconds.
    pub busy_s: f64,
    pub codes: Vec<WatchedCode>,
    /// Code objects seen in samples but not followed (beyond max_codes or unreadable).
    pub unfollowed_samples: u64,
}

/// Whether a thread is on a CPU (or runnable) now: its `/proc/PID/task/TID/stat` state is `R`. The
/// files stay open (one pread per sample).
#[derive(Default)]
struct RunStates {
    files: HashMap<i32, File>,
    buf: Vec<u8>,
}

impl RunStates {
    fn running(&mut self, pid: i32, tid: i32) -> bool {
        use std::os::unix::fs::FileExt;
        let file = match self.files.entry(tid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                match File::open(format!("/proc/{pid}/task/{tid}/stat")) {
                    Ok(f) => e.insert(f),
                    Err(_) => return false,
                }
            }
        };
        self.buf.resize(512, 0);
        let Ok(n) = file.read_at(&mut self.buf, 0) else {
            return false;
        };
        let text = &self.buf[..n];
        match text.iter().rposition(|&b| b == b')') {
            Some(i) => text.get(i + 2) == Some(&b'R'),
            None => false,
        }
    }

    fn retain(&mut self, tids: &[i32]) {
        self.files.retain(|t, _| tids.contains(t));
    }
}

/// Which followed code objects a read pass reads: the `HOT_READS` hottest by samples so far, and
/// `ROTATING_READS` of the others in turn, so a process with hundreds of warm functions costs a
/// bounded number of reads per pass while the sites that matter are read every pass.
const HOT_READS: usize = 32;
const ROTATING_READS: usize = 8;

fn codes_to_read(codes: &HashMap<u64, WatchedCode>, rotation: &mut usize) -> Vec<u64> {
    let mut live: Vec<(u64, u64)> = codes
        .iter()
        .filter(|(_, w)| !w.gone)
        .map(|(&a, w)| (w.samples, a))
        .collect();
    live.sort_unstable_by(|a, b| b.cmp(a));
    let mut out: Vec<u64> = live.iter().take(HOT_READS).map(|&(_, a)| a).collect();
    let rest = &live[live.len().min(HOT_READS)..];
    if !rest.is_empty() {
        for k in 0..ROTATING_READS.min(rest.len()) {
            out.push(rest[(*rotation + k) % rest.len()].1);
        }
        *rotation = (*rotation + ROTATING_READS) % rest.len();
    }
    out
}

pub fn watch(interp: &Interpreter, table: &OpcodeTable, opts: WatchOptions) -> WatchReport {
    watch_until(interp, table, opts, &AtomicBool::new(false))
}

/// `watch`, ending early (with what was read so far) once `stop` is set: Ctrl-C keeps the result.
pub fn watch_until(
    interp: &Interpreter,
    table: &OpcodeTable,
    opts: WatchOptions,
    stop: &AtomicBool,
) -> WatchReport {
    let l = &interp.layout;
    let mem = &interp.mem;
    let walker = FrameWalker::new(mem, l, interp.code_type);
    let adaptive_off = l.code_code_adaptive.unwrap_or(0);
    let mut resolver = TidResolver::default();
    let mut codes: HashMap<u64, WatchedCode> = HashMap::new();
    let mut unreadable: HashMap<u64, u64> = HashMap::new();
    let period = Duration::from_secs_f64(1.0 / opts.rate_hz.max(1.0));
    let start = Instant::now();
    let mut busy = Duration::ZERO;
    let (mut passes, mut running_samples, mut thread_samples, mut read_passes) =
        (0u64, 0u64, 0u64, 0u64);
    let mut without_gil_samples = 0u64;
    let mut tids: Vec<i32> = Vec::new();
    let mut tids_at = start - Duration::from_secs(1);
    let mut next_read = start;
    // Reads are spaced in the target's CPU time, not only in wall time: on a loaded machine the
    // target can sit preempted across several reads, which would then all see one frozen state and
    // weigh it several times. A read pass needs a quarter of a read interval of CPU time since the
    // previous one.
    let mut sched: HashMap<i32, SchedstatReader> = HashMap::new();
    let mut cpu_at_last_read: Option<u64> = None;
    let min_cpu_ns = (opts.read_interval.as_nanos() / 4) as u64;
    let mut idle_read_passes = 0u64;
    let mut run_states = RunStates::default();
    let mut rotation = 0usize;
    // Code objects on a running thread's innermost frame in the latest sampling pass.
    let mut running_codes: HashSet<u64> = HashSet::new();
    let mut next_pass = start;
    while start.elapsed() < opts.duration && !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next_pass {
            std::thread::sleep(next_pass - now);
        }
        next_pass += period;
        let t0 = Instant::now();
        if t0.duration_since(tids_at) > Duration::from_millis(100) {
            tids = procfs::thread_ids(interp.pid).unwrap_or_default();
            run_states.retain(&tids);
            tids_at = t0;
            if tids.is_empty() || procfs::is_gone(interp.pid) {
                break; // the target exited (a zombie still lists its main thread)
            }
        }
        passes += 1;
        running_codes.clear();
        // The GIL's holder, read once per pass: a thread runs Python only while it holds the GIL. A
        // thread parked in C (a condition wait, a selector, a socket send) released it, even when
        // the scheduler shows it runnable for a moment.
        let holder = read_gil_holder(interp);
        if let Ok(threads) = python_threads(interp, &mut resolver, &tids) {
            for th in threads {
                thread_samples += 1;
                if let Some(tid) = th.tid {
                    if !run_states.running(interp.pid, tid) {
                        continue;
                    }
                }
                if let Some(h) = holder {
                    if h != th.tstate {
                        without_gil_samples += 1;
                        continue;
                    }
                }
                let Ok(Some((code, instr))) = walker.top_position(th.tstate) else {
                    continue;
                };
                running_codes.insert(code);
                let unit = (instr - (code + adaptive_off) as i64) / 2;
                if unit < 0 {
                    continue; // frame entered, no instruction run yet
                }
                running_samples += 1;
                if !codes.contains_key(&code) {
                    if codes.len() >= opts.max_codes {
                        *unreadable.entry(code).or_default() += 1;
                        continue;
                    }
                    match read_identity(mem, l, interp.code_type, code) {
                        Ok(identity) => {
                            codes.insert(
                                code,
                                WatchedCode {
                                    identity,
                                    samples_by_unit: HashMap::new(),
                                    samples: 0,
                                    last: None,
                                    sites: BTreeMap::new(),
                                    reads: 0,
                                    gone: false,
                                },
                            );
                        }
                        Err(_) => {
                            *unreadable.entry(code).or_default() += 1;
                            continue;
                        }
                    }
                }
                let w = codes.get_mut(&code).unwrap();
                if (unit as usize) < w.identity.units && !w.gone {
                    w.samples += 1;
                    *w.samples_by_unit.entry(unit as usize).or_default() += 1;
                }
            }
        }
        if Instant::now() >= next_read {
            next_read += opts.read_interval;
            sched.retain(|tid, _| tids.contains(tid));
            let cpu: u64 = tids
                .iter()
                .filter_map(|&tid| {
                    let reader = match sched.entry(tid) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(SchedstatReader::open(interp.pid, tid).ok()?)
                        }
                    };
                    reader.run_ns()
                })
                .sum();
            let ran = cpu_at_last_read
                .map(|c| cpu.saturating_sub(c) >= min_cpu_ns)
                .unwrap_or(true);
            if ran {
                cpu_at_last_read = Some(cpu);
                read_passes += 1;
                for addr in codes_to_read(&codes, &mut rotation) {
                    let at_rest = !running_codes.contains(&addr);
                    read_code(mem, l, table, codes.get_mut(&addr).unwrap(), at_rest);
                }
            } else {
                idle_read_passes += 1;
            }
        }
        busy += t0.elapsed();
    }
    // A last read, so every followed code object has a current decode.
    for w in codes.values_mut().filter(|w| !w.gone) {
        read_code(mem, l, table, w, false);
    }
    let mut list: Vec<WatchedCode> = codes.into_values().collect();
    list.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.identity.address.cmp(&b.identity.address))
    });
    WatchReport {
        passes,
        running_samples,
        without_gil_samples,
        thread_samples,
        read_passes,
        idle_read_passes,
        elapsed_s: start.elapsed().as_secs_f64(),
        busy_s: busy.as_secs_f64(),
        codes: list,
        unfollowed_samples: unreadable.values().sum(),
    }
}

/// The thread state holding the GIL now: `Some(0)` when nobody holds it, `None` when the GIL cannot
/// be read (then no sample is left out for it).
fn read_gil_holder(interp: &Interpreter) -> Option<u64> {
    let l = &interp.layout;
    let mut buf = [0u8; 32];
    crate::process::memory::Memory::read(&interp.mem, interp.gil.address(), &mut buf).ok()?;
    let at = |o: u64, n: usize| buf.get(o as usize..o as usize + n);
    let locked = i32::from_le_bytes(at(l.gil_locked, 4)?.try_into().ok()?);
    let holder = u64::from_le_bytes(at(l.gil_last_holder, 8)?.try_into().ok()?);
    Some(if locked != 0 { holder } else { 0 })
}

fn read_code(
    mem: &dyn crate::process::memory::Memory,
    l: &gilty_layouts::Layout,
    table: &OpcodeTable,
    w: &mut WatchedCode,
    at_rest: bool,
) {
    let bytes = match read_adaptive_checked(mem, l, &w.identity) {
        Ok(Some(b)) => b,
        Ok(None) => {
            w.gone = true; // freed, the address reused
            return;
        }
        Err(_) => return,
    };
    let ins = decode(table, &bytes);
    for i in &ins {
        if i.form.is_some() && i.form != Some(Form::Instrumented) {
            w.sites.entry(i.offset).or_default().observe(
                i,
                table.counter.specialized_shift,
                at_rest,
            );
        }
    }
    w.reads += 1;
    w.last = Some(ins);
}
