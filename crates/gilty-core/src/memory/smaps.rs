//! `/proc/PID/smaps_rollup` (how much of a process's memory is shared and how much private) and
//! `/proc/PID/stat` (its parent, run state and page-fault counters).
//!
//! Both files stay open for the life of the process they describe: a descriptor on a `/proc/PID`
//! file keeps referring to that process, so a recycled pid can never be read by mistake (reads
//! fail with ESRCH once it is gone), and re-reading with `pread` saves an open/close per pass.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// smaps_rollup's totals, in bytes. USS (memory only this process maps) is Private_Clean +
/// Private_Dirty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rollup {
    pub rss: u64,
    pub pss: u64,
    pub shared_clean: u64,
    pub shared_dirty: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    pub anonymous: u64,
    pub swap: u64,
}

impl Rollup {
    pub fn uss(&self) -> u64 {
        self.private_clean + self.private_dirty
    }
}

/// Parses smaps_rollup (or a whole smaps file: its per-mapping fields are summed). Values are in
/// kB.
pub fn parse_rollup(text: &str) -> Rollup {
    let mut r = Rollup::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(kb) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        let bytes = kb * 1024;
        let field = match key {
            "Rss" => &mut r.rss,
            "Pss" => &mut r.pss,
            "Shared_Clean" => &mut r.shared_clean,
            "Shared_Dirty" => &mut r.shared_dirty,
            "Private_Clean" => &mut r.private_clean,
            "Private_Dirty" => &mut r.private_dirty,
            "Anonymous" => &mut r.anonymous,
            "Swap" => &mut r.swap,
            _ => continue,
        };
        *field += bytes;
    }
    r
}

/// The fields of `/proc/PID/stat` gilty uses (proc(5) numbering in the comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// (3) R, S, D, Z, T, ...
    pub state: char,
    /// (4)
    pub ppid: i32,
    /// (10) minor faults: a copy-on-write copy is one.
    pub minflt: u64,
    /// (12)
    pub majflt: u64,
    /// (14), (15) in clock ticks.
    pub utime: u64,
    pub stime: u64,
    /// (22) start time after boot, in clock ticks.
    pub starttime: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may hold spaces and ')' so fields are
/// counted from the last ')'.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3.
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        minflt: num(10)?,
        majflt: num(12)?,
        utime: num(14)?,
        stime: num(15)?,
        starttime: num(22)?,
    })
}

/// Reads a whole /proc file through an open descriptor, from offset 0.
fn pread_all(file: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut len = 0;
    loop {
        if buf.len() - len < 1024 {
            buf.resize(buf.len() * 2 + 4096, 0);
        }
        let n = file.read_at(&mut buf[len..], len as u64)?;
        if n == 0 {
            return Ok(len);
        }
        len += n;
    }
}

/// Kept-open `smaps_rollup` and `stat` of one process.
pub struct ProcFiles {
    pub pid: i32,
    rollup: File,
    stat: File,
    buf: Vec<u8>,
}

impl ProcFiles {
    /// Fails with the OS error (ENOENT: no such process; EACCES: not permitted).
    pub fn open(pid: i32) -> io::Result<ProcFiles> {
        let stat = File::open(format!("/proc/{pid}/stat"))?;
        let rollup = File::open(format!("/proc/{pid}/smaps_rollup"))?;
        Ok(ProcFiles {
            pid,
            rollup,
            stat,
            buf: vec![0; 4096],
        })
    }

    /// The rollup now. An empty read means the process has exited (its mm is gone).
    pub fn read_rollup(&mut self) -> io::Result<Rollup> {
        let n = pread_all(&self.rollup, &mut self.buf)?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(parse_rollup(
            std::str::from_utf8(&self.buf[..n]).unwrap_or(""),
        ))
    }

    pub fn read_stat(&mut self) -> io::Result<Stat> {
        let n = pread_all(&self.stat, &mut self.buf)?;
        parse_stat(std::str::from_utf8(&self.buf[..n]).unwrap_or(""))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc/PID/stat"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rollup_in_bytes() {
        let text = "558b38e7e000-7ffe25df8000 ---p 00000000 00:00 0                          [rollup]\n\
                    Rss:                1760 kB\nPss:                 259 kB\nPss_Dirty:           108 kB\n\
                    Shared_Clean:       1612 kB\nShared_Dirty:          0 kB\nPrivate_Clean:        40 kB\n\
                    Private_Dirty:       108 kB\nAnonymous:           108 kB\nSwap:                  0 kB\n";
        let r = parse_rollup(text);
        assert_eq!(r.rss, 1760 * 1024);
        assert_eq!(r.pss, 259 * 1024);
        assert_eq!(r.shared_clean, 1612 * 1024);
        assert_eq!(r.private_dirty, 108 * 1024);
        assert_eq!(r.uss(), 148 * 1024);
        assert_eq!(r.anonymous, 108 * 1024);
    }

    #[test]
    fn parses_stat_with_odd_command_names() {
        let text = "4242 (gunicorn: worker [a) b]) S 4200 4200 4200 0 -1 4194624 26931 0 1 0 120 35 0 0 20 0 1 0 987654 \
                    230000000 55000 18446744073709551615 1 1 0 0 0 0 0 16781312 134234627 0 0 0 17 1 0 0 0 0 0\n";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 4200);
        assert_eq!(s.minflt, 26931);
        assert_eq!(s.majflt, 1);
        assert_eq!(s.utime, 120);
        assert_eq!(s.stime, 35);
        assert_eq!(s.starttime, 987654);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn reads_own_process() {
        let mut f = ProcFiles::open(std::process::id() as i32).unwrap();
        let r = f.read_rollup().unwrap();
        assert!(r.rss > 0 && r.pss > 0 && r.pss <= r.rss);
        let s = f.read_stat().unwrap();
        assert!(s.minflt > 0);
        // Re-reading through the same descriptors gives fresh values.
        assert!(f.read_rollup().unwrap().rss > 0);
    }
}
