//! How many times a thread has been switched out (`/proc/PID/task/TID/status`:
//! `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches`). Beside schedstat's count of times it
//! was switched in, it says whether a runnable thread is on a CPU now: switched in once more than
//! out. Read before that count, a thread switched in between the two reads looks on a CPU (it is by
//! then), so "off a CPU" is never said of a thread that had one at either read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub struct SwitchesReader {
    file: File,
    buf: Vec<u8>,
}

impl SwitchesReader {
    pub fn open(pid: i32, tid: i32) -> io::Result<Self> {
        let file = File::open(format!("/proc/{pid}/task/{tid}/status"))?;
        Ok(SwitchesReader {
            file,
            buf: vec![0; 4096],
        })
    }

    /// Times switched out so far, or None when unreadable.
    pub fn read(&mut self) -> Option<u64> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        parse_switches(&self.buf[..n])
    }
}

/// The thread is queued on the CPU the caller runs on: off a CPU perhaps only because the caller
/// took that CPU to read it (a sampler's own wake-up preempts whom it finds there), so its being
/// off a CPU this instant says nothing of the load it meets otherwise.
pub fn queued_behind_caller(pid: i32, tid: i32) -> bool {
    let mine = unsafe { libc::sched_getcpu() };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else {
        return true;
    };
    mine >= 0 && last_cpu(&stat) == Some(mine)
}

/// The CPU a thread last ran on, or whose run queue it is on (`/proc/PID/task/TID/stat` field 39).
fn last_cpu(stat: &str) -> Option<i32> {
    // Fields after the command's closing parenthesis start at field 3 (the state).
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(39 - 3)?
        .parse()
        .ok()
}

fn parse_switches(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let mut total = None;
    for line in text.lines() {
        let value = line
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"));
        if let Some(v) = value {
            total = Some(total.unwrap_or(0) + v.trim().parse::<u64>().ok()?);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_counts_are_summed() {
        let text = b"Name:\tpython3\nState:\tR (running)\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t545\n";
        assert_eq!(parse_switches(text), Some(695));
        assert_eq!(parse_switches(b"Name:\tx\n"), None);
    }

    #[test]
    fn the_cpu_field_of_a_stat_line() {
        let stat = "42 (a (b) c) R 1 42 42 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 2 0 100 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(last_cpu(stat), Some(1));
        let pid = std::process::id() as i32;
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        // This thread is on the CPU it asks about.
        assert!(queued_behind_caller(pid, tid));
    }

    #[test]
    fn this_thread_is_on_a_cpu_while_it_reads_itself() {
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let pid = std::process::id() as i32;
        let mut switches = SwitchesReader::open(pid, tid).unwrap();
        let out = switches.read().unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).unwrap();
        let switched_in: u64 = stat.split_whitespace().nth(2).unwrap().parse().unwrap();
        if switched_in > 0 {
            // Kernels with scheduler statistics: a running thread was switched in once more than
            // out.
            assert!(switched_in > out, "in {switched_in}, out {out}");
        }
    }
}
