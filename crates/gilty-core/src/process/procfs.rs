//! Per-thread facts from /proc: the thread list, names, and the syscall a thread is blocked in.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// True when the process is gone or only a zombie is left.
pub fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => true,
    }
}

pub fn thread_ids(pid: i32) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The thread's ids from the PID namespace of /proc's mount down to the thread's own (the `NSpid`
/// line of `/proc/PID/task/TID/status`): one id unless the process runs in a PID namespace of its
/// own (a container), where the last one is what the thread itself sees (`gettid()`,
/// `threading.get_native_id()`).
pub fn ns_tids(pid: i32, tid: i32) -> Option<Vec<i32>> {
    parse_nspid(&std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?)
}

fn parse_nspid(status: &str) -> Option<Vec<i32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let ids: Vec<i32> = line
        .split_ascii_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    (!ids.is_empty()).then_some(ids)
}

pub fn comm(pid: i32, tid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(s.trim_end().to_owned())
}

pub fn exe(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// What /proc/PID/task/TID/syscall says: the thread is running (or runnable), or blocked in a
/// syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallState {
    Running,
    Blocked {
        nr: i64,
        arg0: u64,
    },
    /// The thread is gone, or the file could not be parsed.
    Unavailable,
}

pub fn parse_syscall(text: &[u8]) -> SyscallState {
    let s = std::str::from_utf8(text).unwrap_or("");
    let s = s.trim();
    if s.starts_with("running") {
        return SyscallState::Running;
    }
    let mut it = s.split_ascii_whitespace();
    let Some(Ok(nr)) = it.next().map(str::parse::<i64>) else {
        return SyscallState::Unavailable;
    };
    if nr < 0 {
        // -1: blocked but not in a syscall (e.g. a page fault); treat as running.
        return SyscallState::Running;
    }
    let arg0 = it
        .next()
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    SyscallState::Blocked { nr, arg0 }
}

/// Keeps /proc/PID/task/TID/syscall open and re-reads it with pread, which avoids an open/close per
/// sample.
pub struct SyscallReader {
    file: File,
    buf: [u8; 256],
}

impl SyscallReader {
    pub fn open(pid: i32, tid: i32) -> io::Result<Self> {
        let file = File::open(format!("/proc/{pid}/task/{tid}/syscall"))?;
        Ok(SyscallReader {
            file,
            buf: [0; 256],
        })
    }

    pub fn read(&mut self) -> SyscallState {
        match self.file.read_at(&mut self.buf, 0) {
            Ok(n) if n > 0 => parse_syscall(&self.buf[..n]),
            _ => SyscallState::Unavailable,
        }
    }
}

/// A thread's `/proc/PID/task/TID/schedstat`, kept open: nanoseconds it has spent on a CPU.
pub struct SchedstatReader {
    file: File,
    buf: [u8; 96],
}

impl SchedstatReader {
    pub fn open(pid: i32, tid: i32) -> io::Result<Self> {
        let file = File::open(format!("/proc/{pid}/task/{tid}/schedstat"))?;
        Ok(SchedstatReader { file, buf: [0; 96] })
    }

    /// CPU time in ns (the first field), or None when unreadable.
    pub fn run_ns(&mut self) -> Option<u64> {
        self.read().map(|s| s.run_ns)
    }

    pub fn read(&mut self) -> Option<Schedstat> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        parse_schedstat(&self.buf[..n])
    }
}

/// A thread's scheduling counters. Both only grow, and both move whenever the thread gets a CPU
/// (`pcount` when it is switched in, `run_ns` when it is switched out): the same pair read twice
/// means the thread did not run in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedstat {
    pub run_ns: u64,
    /// Time spent runnable on a run queue, waiting for a CPU (the second field). The kernel adds a
    /// wait when it ends (the thread is switched in), so a wait going on is not in it yet.
    pub delay_ns: u64,
    /// Times the thread was switched in (the third field).
    pub pcount: u64,
}

fn parse_schedstat(text: &[u8]) -> Option<Schedstat> {
    let mut fields = text
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let mut next = || -> Option<u64> { std::str::from_utf8(fields.next()?).ok()?.parse().ok() };
    let run_ns = next()?;
    let delay_ns = next().unwrap_or(0);
    let pcount = next().unwrap_or(0);
    // A kernel without scheduler statistics prints "0 0 0": no counter to compare.
    (run_ns != 0).then_some(Schedstat {
        run_ns,
        delay_ns,
        pcount,
    })
}

/// CPU bandwidth counters of a process's cgroup (`cpu.stat`): enforcement periods, periods in which
/// the group ran out of quota, and the time its threads were held off the CPU for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupCpu {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

/// The `cpu.stat` file of `pid`'s cgroup: cgroup v2 (`0::/path` under a cgroup2 mount), else the v1
/// `cpu` controller's. None when neither exists (no CPU controller, or the process is gone).
pub fn cgroup_cpu_stat_path(pid: i32) -> Option<String> {
    let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut v2 = None;
    let mut v1 = None;
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_owned());
        } else if controllers.split(',').any(|c| c == "cpu") {
            v1 = Some(path.to_owned());
        }
    }
    // Mount points from mountinfo (field 5), by filesystem type (after the " - " separator).
    let mount_of = |want_v2: bool| {
        mounts.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let fstype = post.split_whitespace().next()?;
            let point = pre.split_whitespace().nth(4)?;
            let opts = post.split_whitespace().nth(2).unwrap_or("");
            let ok = if want_v2 {
                fstype == "cgroup2"
            } else {
                fstype == "cgroup" && opts.split(',').any(|o| o == "cpu")
            };
            ok.then(|| point.to_owned())
        })
    };
    let candidates = [(v2, true), (v1, false)];
    candidates.into_iter().find_map(|(path, want_v2)| {
        let file = format!(
            "{}{}/cpu.stat",
            mount_of(want_v2)?,
            path?.trim_end_matches('/')
        );
        // A v2 group without the cpu controller has a cpu.stat without the throttling lines.
        let text = std::fs::read_to_string(&file).ok()?;
        parse_cgroup_cpu(&text).map(|_| file)
    })
}

/// Parses v2 (`throttled_usec`) and v1 (`throttled_time`, ns) cpu.stat; None without throttling
/// counters.
pub fn parse_cgroup_cpu(text: &str) -> Option<CgroupCpu> {
    let mut c = CgroupCpu::default();
    let mut seen = false;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        match k {
            "nr_periods" => c.nr_periods = v,
            "nr_throttled" => {
                c.nr_throttled = v;
                seen = true;
            }
            "throttled_usec" => c.throttled_ns = v * 1000,
            "throttled_time" => c.throttled_ns = v,
            _ => {}
        }
    }
    seen.then_some(c)
}

pub fn read_cgroup_cpu(path: &str) -> Option<CgroupCpu> {
    parse_cgroup_cpu(&std::fs::read_to_string(path).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedstat() {
        assert_eq!(
            parse_schedstat(b"123456 789 10\n"),
            Some(Schedstat {
                run_ns: 123456,
                delay_ns: 789,
                pcount: 10
            })
        );
        assert_eq!(parse_schedstat(b""), None);
        assert_eq!(parse_schedstat(b"0 0 0\n"), None);
        let me = std::process::id() as i32;
        let mut r = SchedstatReader::open(me, me).unwrap();
        assert!(r.run_ns().unwrap() > 0);
    }

    #[test]
    fn parses_cgroup_cpu_stat_v1_and_v2() {
        let v2 = "usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 50\nnr_throttled 20\nthrottled_usec 3000\n";
        assert_eq!(
            parse_cgroup_cpu(v2),
            Some(CgroupCpu {
                nr_periods: 50,
                nr_throttled: 20,
                throttled_ns: 3_000_000
            })
        );
        let v1 = "nr_periods 7\nnr_throttled 2\nthrottled_time 1234\nnr_bursts 0\n";
        assert_eq!(
            parse_cgroup_cpu(v1),
            Some(CgroupCpu {
                nr_periods: 7,
                nr_throttled: 2,
                throttled_ns: 1234
            })
        );
        // A v2 group whose cpu controller is off lists usage only.
        assert_eq!(
            parse_cgroup_cpu("usage_usec 1\nuser_usec 1\nsystem_usec 0\n"),
            None
        );
    }

    #[test]
    fn parses_nspid() {
        assert_eq!(
            parse_nspid("Name:\tpython3\nNSpid:\t19731\t1\nNSsid:\t0\n"),
            Some(vec![19731, 1])
        );
        assert_eq!(parse_nspid("NSpid:\t42\n"), Some(vec![42]));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        let me = std::process::id() as i32;
        assert_eq!(ns_tids(me, me).and_then(|v| v.first().copied()), Some(me));
    }

    #[test]
    fn parses_running_and_blocked() {
        assert_eq!(parse_syscall(b"running\n"), SyscallState::Running);
        assert_eq!(
            parse_syscall(b"202 0x7f1c2d4e5048 0x89 0x0 0x0 0xffffffff 0x0 0x7ffd 0x7f12\n"),
            SyscallState::Blocked {
                nr: 202,
                arg0: 0x7f1c2d4e5048
            }
        );
        assert_eq!(parse_syscall(b"-1 0x7ffd 0x7f12\n"), SyscallState::Running);
        assert_eq!(parse_syscall(b""), SyscallState::Unavailable);
    }

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id() as i32;
        let tids = thread_ids(me).unwrap();
        assert!(tids.contains(&me));
        assert!(!is_gone(me));
        let mut r = SyscallReader::open(me, me).unwrap();
        // Reading our own thread: the kernel reports the read syscall itself or "running".
        assert_ne!(r.read(), SyscallState::Unavailable);
    }
}
