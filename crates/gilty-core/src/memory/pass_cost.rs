//! One measurement of one process with each part timed, for the memory cost benchmark.

use super::cow::CowTracker;
use super::pagemap::PagemapReader;
use super::smaps::ProcFiles;
use crate::clock::monotonic_ns;
use crate::error::{from_os, Result};
use crate::interp::gc_config::locate;
use crate::interp::interpreter::attach;
use crate::process::maps::read_maps;
use crate::process::memory::ProcessMemory;

/// The parts of one measurement of one process, each timed (seconds): for the cost benchmark.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassCost {
    pub rss: u64,
    pub stat_s: f64,
    pub smaps_s: f64,
    pub maps_s: f64,
    pub gc_s: f64,
    pub pagemap_baseline_s: f64,
    pub pagemap_scan_s: f64,
    pub pages_read: u64,
    pub shared_pages: u64,
}

/// Measures `pid` once the way a pass does (stat, smaps_rollup, maps, GC state when Python, and a
/// page baseline followed by one rescan) and times each part.
pub fn measure_once(pid: i32) -> Result<PassCost> {
    let mut c = PassCost::default();
    let t = || monotonic_ns();
    let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e9;
    let mut files = ProcFiles::open(pid).map_err(|e| from_os(pid, &e, "/proc/PID/smaps_rollup"))?;
    let t0 = t();
    files
        .read_stat()
        .map_err(|e| from_os(pid, &e, "/proc/PID/stat"))?;
    let t1 = t();
    c.rss = files
        .read_rollup()
        .map_err(|e| from_os(pid, &e, "/proc/PID/smaps_rollup"))?
        .rss;
    let t2 = t();
    let maps = read_maps(pid)?;
    let t3 = t();
    c.stat_s = secs(t0, t1);
    c.smaps_s = secs(t1, t2);
    c.maps_s = secs(t2, t3);
    if let (Ok(loc), Ok(mem)) = (
        attach(pid).and_then(|i| locate(&i)),
        ProcessMemory::open(pid),
    ) {
        let t4 = t();
        let _ = loc.read(&mem);
        c.gc_s = secs(t4, t());
    }
    let mut reader = PagemapReader::open(pid).map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    let t5 = t();
    let mut cow = CowTracker::baseline(&mut reader, &maps, &monotonic_ns)
        .map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    let t6 = t();
    let d = cow
        .scan(&mut reader, &|_, _| 0.0, &monotonic_ns)
        .map_err(|e| from_os(pid, &e, "/proc/PID/pagemap"))?;
    c.pagemap_baseline_s = secs(t5, t6);
    c.pagemap_scan_s = secs(t6, t());
    c.pages_read = d.pages_read;
    c.shared_pages = cow.baseline.shared_pages;
    Ok(c)
}
