//! Copy-on-write accounting for one process, page by page, from `/proc/PID/pagemap`.
//!
//! At the baseline, every page of the process's copy-on-write mappings (see `is_cow_mapping`) that
//! is present and *not* exclusively mapped is still shared with another process — for a forked
//! worker, with its master. Each later scan re-reads those pages; one that has become exclusively
//! mapped (bit 56) has been copied: the process wrote to it (reference counts, GC list links, ...)
//! and the kernel gave it a private copy. The copy happened between the moment the page's entry was
//! read in the previous scan and the moment it was read in this one, so pages are read in chunks
//! with a timestamp per chunk, and each chunk's new copies are attributed to garbage collection
//! when GC windows cover most of that chunk's interval (`gc_fraction`), else to "outside GC".
//!
//! A page can also become exclusive without being copied: when every *other* process mapping it
//! copied or dropped it (the master exiting, say). When page frame numbers are readable (root or
//! CAP_SYS_ADMIN) such a page keeps its frame number and is counted apart (`sole`), not as a copy.

use super::pagemap::{
    is_cow_mapping, PagemapReader, CHUNK_PAGES, EXCLUSIVE, PFN_MASK, PRESENT, SWAPPED,
};
use crate::process::maps::MapEntry;
use std::io;

/// Page states. Only `SHARED` pages are watched; the others are final.
const UNTRACKED: u8 = 0;
const SHARED: u8 = 1;
const COPIED: u8 = 2;
const RELEASED: u8 = 3;
const SOLE: u8 = 4;

struct Chunk {
    first: usize,
    len: usize,
    shared_left: u32,
    last_read_ns: u64,
}

struct Region {
    start_page: u64,
    states: Vec<u8>,
    /// Frame number of each page at the baseline (empty unless frame numbers are readable).
    pfns: Vec<u64>,
    chunks: Vec<Chunk>,
}

/// How copies are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CowMethod {
    /// The exclusively-mapped bit alone.
    ExclusiveBit,
    /// The exclusively-mapped bit plus a changed page frame number (root: tells a copy from a page
    /// left with a single owner).
    ExclusiveBitAndPfn,
}

impl CowMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            CowMethod::ExclusiveBit => "pagemap_exclusive_bit",
            CowMethod::ExclusiveBitAndPfn => "pagemap_exclusive_bit_and_pfn",
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline {
    pub t_ns: u64,
    /// Pages present in the copy-on-write mappings.
    pub present_pages: u64,
    /// Of those, still shared: the pages watched from now on.
    pub shared_pages: u64,
    pub mappings: u64,
    pub scan_ns: u64,
}

/// What one scan found new since the previous one (pages), and what it cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScanDelta {
    pub gc_pages: u64,
    pub outside_pages: u64,
    /// Pages whose attribution rests on an estimate (see `attribute`; included in `gc_pages` or
    /// `outside_pages` as well): the attribution's error bound.
    pub ambiguous_pages: u64,
    pub released_pages: u64,
    pub sole_pages: u64,
    pub pages_read: u64,
    pub scan_ns: u64,
}

impl ScanDelta {
    pub fn add(&mut self, o: &ScanDelta) {
        self.gc_pages += o.gc_pages;
        self.outside_pages += o.outside_pages;
        self.ambiguous_pages += o.ambiguous_pages;
        self.released_pages += o.released_pages;
        self.sole_pages += o.sole_pages;
        self.pages_read += o.pages_read;
        self.scan_ns += o.scan_ns;
    }
}

pub struct CowTracker {
    regions: Vec<Region>,
    pub method: CowMethod,
    pub page_size: u64,
    pub baseline: Baseline,
    pub totals: ScanDelta,
    entries: Vec<u64>,
    /// Background copy rate outside GC: copies seen in chunk intervals without GC, and the
    /// exposure of those intervals (shared pages x ns).
    clean_copies: u64,
    clean_exposure: f64,
}

impl CowTracker {
    /// Reads the pages of every copy-on-write mapping in `maps` and starts watching the shared
    /// ones.
    pub fn baseline(
        reader: &mut PagemapReader,
        maps: &[MapEntry],
        now: &dyn Fn() -> u64,
    ) -> io::Result<CowTracker> {
        let t0 = now();
        let ps = reader.page_size;
        let mut entries = Vec::with_capacity(CHUNK_PAGES);
        let mut regions = Vec::new();
        let mut baseline = Baseline {
            t_ns: t0,
            ..Baseline::default()
        };
        let mut pfn_seen = false;
        for m in maps.iter().filter(|m| is_cow_mapping(m)) {
            baseline.mappings += 1;
            let (first, last) = (m.start / ps, m.end.div_ceil(ps));
            let mut region = Region {
                start_page: first,
                states: Vec::new(),
                pfns: Vec::new(),
                chunks: Vec::new(),
            };
            let mut page = first;
            let mut any_shared = false;
            while page < last {
                let n = ((last - page) as usize).min(CHUNK_PAGES);
                reader.read(page, n, &mut entries)?;
                let t = now();
                let first_idx = region.states.len();
                let mut shared_left = 0u32;
                for &e in &entries {
                    let state = if e & PRESENT == 0 {
                        UNTRACKED
                    } else {
                        baseline.present_pages += 1;
                        if e & EXCLUSIVE == 0 {
                            shared_left += 1;
                            SHARED
                        } else {
                            UNTRACKED
                        }
                    };
                    pfn_seen |= e & PRESENT != 0 && e & PFN_MASK != 0;
                    region.states.push(state);
                    region.pfns.push(e & PFN_MASK);
                }
                any_shared |= shared_left > 0;
                baseline.shared_pages += shared_left as u64;
                region.chunks.push(Chunk {
                    first: first_idx,
                    len: n,
                    shared_left,
                    last_read_ns: t,
                });
                page += n as u64;
            }
            if any_shared {
                regions.push(region);
            }
        }
        let method = if pfn_seen {
            CowMethod::ExclusiveBitAndPfn
        } else {
            CowMethod::ExclusiveBit
        };
        for r in &mut regions {
            if method == CowMethod::ExclusiveBit {
                r.pfns = Vec::new();
            }
            r.states.shrink_to_fit();
        }
        baseline.scan_ns = now().saturating_sub(t0);
        Ok(CowTracker {
            regions,
            method,
            page_size: ps,
            baseline,
            totals: ScanDelta::default(),
            entries,
            clean_copies: 0,
            clean_exposure: 0.0,
        })
    }

    /// Pages still shared (watched).
    pub fn shared_pages(&self) -> u64 {
        self.regions
            .iter()
            .flat_map(|r| r.chunks.iter())
            .map(|c| c.shared_left as u64)
            .sum()
    }

    /// Re-reads every chunk that still has shared pages and classifies the pages that changed.
    /// `gc_fraction(a, b)` is the share of the interval `[a, b]` (ns) covered by GC windows.
    pub fn scan(
        &mut self,
        reader: &mut PagemapReader,
        gc_fraction: &dyn Fn(u64, u64) -> f64,
        now: &dyn Fn() -> u64,
    ) -> io::Result<ScanDelta> {
        let t0 = now();
        let mut d = ScanDelta::default();
        let pfn_mode = self.method == CowMethod::ExclusiveBitAndPfn;
        let mut regions = std::mem::take(&mut self.regions);
        for r in &mut regions {
            for c in &mut r.chunks {
                if c.shared_left == 0 {
                    continue;
                }
                reader.read(r.start_page + c.first as u64, c.len, &mut self.entries)?;
                let t = now();
                d.pages_read += c.len as u64;
                let shared_before = c.shared_left as u64;
                let mut copied = 0u64;
                for (i, &e) in self.entries.iter().enumerate() {
                    let idx = c.first + i;
                    if r.states[idx] != SHARED {
                        continue;
                    }
                    let new_state = classify(e, if pfn_mode { Some(r.pfns[idx]) } else { None });
                    if new_state == SHARED {
                        continue;
                    }
                    r.states[idx] = new_state;
                    c.shared_left -= 1;
                    match new_state {
                        COPIED => copied += 1,
                        RELEASED => d.released_pages += 1,
                        _ => d.sole_pages += 1,
                    }
                }
                self.attribute(
                    copied,
                    shared_before,
                    c.last_read_ns,
                    t,
                    gc_fraction(c.last_read_ns, t),
                    &mut d,
                );
                c.last_read_ns = t;
            }
        }
        self.regions = regions;
        d.scan_ns = now().saturating_sub(t0);
        self.totals.add(&d);
        Ok(d)
    }

    /// Splits the `copied` pages of one chunk between GC and outside GC. The chunk's interval
    /// `[a, b]` was covered by GC windows for the share `f`:
    ///
    /// - `f == 0`: all outside GC. Such intervals also measure the process's background copy
    ///   rate (copies per shared page per second outside GC).
    /// - `f > 0`: outside GC gets what the background rate predicts for the interval's non-GC time
    ///   (at most `copied`), GC the rest. A collection copies far faster than request handling, so
    ///   splitting by time alone would hand most of a collection's first milliseconds to "outside".
    ///   The part given to "outside" rests on the estimate and is counted as ambiguous; with no
    ///   background measured yet everything goes to GC and all of it is ambiguous.
    fn attribute(
        &mut self,
        copied: u64,
        shared_before: u64,
        a: u64,
        b: u64,
        f: f64,
        d: &mut ScanDelta,
    ) {
        let span = b.saturating_sub(a) as f64;
        if f <= 0.0 {
            self.clean_exposure += span * shared_before as f64;
            self.clean_copies += copied;
            d.outside_pages += copied;
            return;
        }
        if copied == 0 {
            return;
        }
        if self.clean_exposure <= 0.0 {
            d.gc_pages += copied;
            if f < 1.0 {
                d.ambiguous_pages += copied;
            }
            return;
        }
        let rate = self.clean_copies as f64 / self.clean_exposure;
        let expected = rate * (1.0 - f) * span * shared_before as f64;
        let outside = (expected.round() as u64).min(copied);
        d.outside_pages += outside;
        d.gc_pages += copied - outside;
        d.ambiguous_pages += outside;
    }

    /// Watched pages no longer inside any mapping of `maps` were released (unmapped), not copied;
    /// marks them so a new mapping at the same address is not mistaken for copies. Returns pages
    /// marked.
    pub fn forget_unmapped(&mut self, maps: &[MapEntry]) -> u64 {
        let ps = self.page_size;
        let mut marked = 0;
        for r in &mut self.regions {
            for c in &mut r.chunks {
                if c.shared_left == 0 {
                    continue;
                }
                for idx in c.first..c.first + c.len {
                    if r.states[idx] != SHARED {
                        continue;
                    }
                    let addr = (r.start_page + idx as u64) * ps;
                    let i = maps.partition_point(|m| m.end <= addr);
                    let mapped = maps
                        .get(i)
                        .map(|m| m.start <= addr && is_cow_mapping(m))
                        .unwrap_or(false);
                    if !mapped {
                        r.states[idx] = RELEASED;
                        c.shared_left -= 1;
                        marked += 1;
                    }
                }
            }
        }
        self.totals.released_pages += marked;
        marked
    }
}

/// The new state of a page that was shared at the baseline, from its pagemap entry now.
fn classify(e: u64, baseline_pfn: Option<u64>) -> u8 {
    if e & PRESENT == 0 {
        // Swapped out: still the same page as far as we can tell.
        return if e & SWAPPED != 0 { SHARED } else { RELEASED };
    }
    let pfn_changed = match baseline_pfn {
        Some(b) => e & PFN_MASK != b,
        None => true,
    };
    if e & EXCLUSIVE != 0 {
        if pfn_changed {
            COPIED
        } else {
            SOLE
        }
    } else if baseline_pfn.is_some() && pfn_changed {
        // A private copy that is shared again (this process forked a child of its own).
        COPIED
    } else {
        SHARED
    }
}

/// Share of `[a, b]` covered by the windows `(start, end)` (an open window has `end == u64::MAX`).
pub fn covered_fraction(windows: &[(u64, u64)], a: u64, b: u64) -> f64 {
    if b <= a {
        return 0.0;
    }
    let covered: u64 = windows
        .iter()
        .map(|&(s, e)| e.min(b).saturating_sub(s.max(a)))
        .sum();
    (covered as f64 / (b - a) as f64).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::forked::{Forked, Mapping};

    #[test]
    fn classifies_pages() {
        let p = PRESENT;
        assert_eq!(classify(0, None), RELEASED);
        assert_eq!(classify(SWAPPED, None), SHARED);
        assert_eq!(classify(p, None), SHARED);
        assert_eq!(classify(p | EXCLUSIVE, None), COPIED);
        assert_eq!(classify(p | EXCLUSIVE | 7, Some(7)), SOLE);
        assert_eq!(classify(p | EXCLUSIVE | 8, Some(7)), COPIED);
        assert_eq!(classify(p | 7, Some(7)), SHARED);
        assert_eq!(classify(p | 9, Some(7)), COPIED);
    }

    fn empty_tracker() -> CowTracker {
        CowTracker {
            regions: Vec::new(),
            method: CowMethod::ExclusiveBit,
            page_size: 4096,
            baseline: Baseline::default(),
            totals: ScanDelta::default(),
            entries: Vec::new(),
            clean_copies: 0,
            clean_exposure: 0.0,
        }
    }

    #[test]
    fn splits_mixed_intervals_by_the_background_rate() {
        let mut t = empty_tracker();
        let mut d = ScanDelta::default();
        // No background measured yet: a chunk that saw a collection start goes to GC, ambiguously.
        t.attribute(50, 1000, 0, 1_000_000_000, 0.01, &mut d);
        assert_eq!(
            (d.gc_pages, d.outside_pages, d.ambiguous_pages),
            (50, 0, 50)
        );
        // One second without GC: 10 of 1000 shared pages copied.
        let mut d = ScanDelta::default();
        t.attribute(10, 1000, 0, 1_000_000_000, 0.0, &mut d);
        assert_eq!((d.gc_pages, d.outside_pages, d.ambiguous_pages), (0, 10, 0));
        // The next second holds the first 1 % of a collection: ~10 pages are background, the rest
        // GC.
        let mut d = ScanDelta::default();
        t.attribute(500, 1000, 0, 1_000_000_000, 0.01, &mut d);
        assert_eq!(
            (d.gc_pages, d.outside_pages, d.ambiguous_pages),
            (490, 10, 10)
        );
        // Entirely inside a collection: all GC, nothing estimated.
        let mut d = ScanDelta::default();
        t.attribute(300, 1000, 0, 50_000_000, 1.0, &mut d);
        assert_eq!(
            (d.gc_pages, d.outside_pages, d.ambiguous_pages),
            (300, 0, 0)
        );
    }

    #[test]
    fn fraction_of_interval_under_windows() {
        let w = [(100, 200), (300, u64::MAX)];
        assert_eq!(covered_fraction(&w, 0, 100), 0.0);
        assert_eq!(covered_fraction(&w, 100, 200), 1.0);
        assert_eq!(covered_fraction(&w, 150, 250), 0.5);
        assert_eq!(covered_fraction(&w, 250, 350), 0.5);
        assert_eq!(covered_fraction(&w, 400, 400), 0.0);
    }

    /// A forked child that writes to half of a buffer it shares with its parent: the tracker counts
    /// exactly those pages as copies, attributed by the GC-window function.
    #[test]
    fn counts_copies_in_a_forked_child() {
        let pages = 256;
        let mapping = Mapping::new(pages, 1);
        let forked = Forked::spawn(|| mapping.fill(0..pages / 2, 2));
        let child = forked.pid;
        let start = mapping.start();
        let maps = vec![MapEntry {
            start,
            end: start + mapping.len() as u64,
            perms: "rw-p".into(),
            offset: 0,
            path: None,
        }];
        let clock = || crate::clock::monotonic_ns();
        let mut reader = PagemapReader::open(child).unwrap();
        let mut t = CowTracker::baseline(&mut reader, &maps, &clock).unwrap();
        assert_eq!(t.baseline.shared_pages, pages as u64);
        forked.step();
        let d = t.scan(&mut reader, &|_, _| 1.0, &clock).unwrap();
        assert_eq!(d.gc_pages, (pages / 2) as u64, "{d:?}");
        assert_eq!(d.outside_pages, 0);
        assert_eq!(t.shared_pages(), (pages / 2) as u64);
        // Nothing changes in a second scan; attribution outside GC would apply to new copies.
        let d2 = t.scan(&mut reader, &|_, _| 0.0, &clock).unwrap();
        assert_eq!((d2.gc_pages, d2.outside_pages), (0, 0));
        // The region unmapped: the remaining shared pages are released, not copied.
        assert_eq!(t.forget_unmapped(&[]), (pages / 2) as u64);
    }
}
