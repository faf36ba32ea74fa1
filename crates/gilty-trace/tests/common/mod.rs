//! Helpers shared by the integration tests: start `target.py` under a pyenv interpreter and read
//! its output.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const VERSIONS: &[&str] = &["3.10.13", "3.11.7", "3.12.1", "3.13.0"];

pub fn python(version: &str) -> Option<PathBuf> {
    let minor = &version[..version.rfind('.').unwrap()];
    let p = PathBuf::from(format!("/root/.pyenv/versions/{version}/bin/python{minor}"));
    p.exists().then_some(p)
}

pub struct Target {
    pub child: Child,
    pub pid: i32,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub marker: PathBuf,
}

impl Target {
    /// Starts target.py and waits for its "ready" line.
    pub fn start(python: &PathBuf, switch_interval: f64, lifetime: f64) -> Target {
        Target::start_with(python, switch_interval, lifetime, "spin")
    }

    pub fn start_with(
        python: &PathBuf,
        switch_interval: f64,
        lifetime: f64,
        workload: &str,
    ) -> Target {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/target.py");
        let marker = std::env::temp_dir().join(format!(
            "gilty-trace-marker-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos() ^ (rand_u64() as u128)
        ));
        let _ = std::fs::remove_file(&marker);
        let mut child = Command::new(python)
            .arg(&script)
            .arg(&marker)
            .arg(switch_interval.to_string())
            .arg(lifetime.to_string())
            .arg(workload)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start target");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                match line {
                    Ok(l) => l2.lock().unwrap().push(l),
                    Err(_) => break,
                }
            }
        });
        let mut t = Target {
            pid: child.id() as i32,
            child,
            lines,
            marker,
        };
        t.wait_line("ready", Duration::from_secs(10))
            .expect("target ready");
        t
    }

    pub fn wait_line(&mut self, prefix: &str, timeout: Duration) -> Option<String> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.starts_with(prefix))
            {
                return Some(l.clone());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    pub fn lines_with(&self, prefix: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub fn touch_marker(&self) {
        std::fs::write(&self.marker, b"go").unwrap();
    }

    /// The mapped libpython (path as /proc/PID/maps shows it).
    pub fn libpython(&self, version: &str) -> String {
        let minor = &version[..version.rfind('.').unwrap()];
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains(&format!("libpython{minor}.so")))
            .expect("libpython mapped")
            .to_owned()
    }

    /// The byte at file offset `offset` of `path` as the target sees it in memory (/proc/PID/mem).
    pub fn text_byte(&self, path: &str, offset: u64) -> u8 {
        use std::os::unix::fs::FileExt;
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        for l in maps.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[5] != path {
                continue;
            }
            let (s, e) = f[0].split_once('-').unwrap();
            let (s, e) = (
                u64::from_str_radix(s, 16).unwrap(),
                u64::from_str_radix(e, 16).unwrap(),
            );
            let moff = u64::from_str_radix(f[2], 16).unwrap();
            if offset >= moff && offset < moff + (e - s) {
                let mem = std::fs::File::open(format!("/proc/{}/mem", self.pid)).unwrap();
                let mut b = [0u8];
                mem.read_exact_at(&mut b, s + offset - moff).unwrap();
                return b[0];
            }
        }
        panic!("offset {offset:#x} of {path} not mapped");
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.marker);
    }
}

fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = (&f).read_exact(&mut b);
    }
    u64::from_ne_bytes(b)
}

pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
