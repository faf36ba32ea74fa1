//! What a forked process still shares with its parent, counted since the fork rather than since
//! gilty first saw it: every page of the child's copy-on-write mappings is compared with the page
//! at the same address in the parent (fork keeps addresses).
//!
//! - same page frame in both: **shared with the parent** (inherited and never written by either);
//! - the parent maps a page there, the child another one: **copied** (an inherited page one of the
//!   two wrote since the fork, or freed and reused);
//! - the parent maps nothing there: **new** (allocated by the child after the fork — for a worker
//!   that imports its application itself, its whole import footprint).
//!
//! Frame numbers need root (CAP_SYS_ADMIN). Without them the exclusively-mapped bit stands in: a
//! page the child does not map alone is counted as shared with the parent when the parent maps that
//! address, and a page it maps alone as copied or new by the same rule. Reading pagemap changes
//! nothing in either process.

use super::pagemap::{is_cow_mapping, PagemapReader, CHUNK_PAGES, EXCLUSIVE, PFN_MASK, PRESENT};
use crate::process::maps::read_maps;
use std::io;

/// Page counts of one child against its parent (bytes once multiplied by `page_size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForkShare {
    pub present_pages: u64,
    pub shared_with_parent_pages: u64,
    pub copied_pages: u64,
    pub new_pages: u64,
    /// Present, not mapped by the child alone, yet not the parent's page (shared with a sibling, or
    /// with a child of its own).
    pub shared_other_pages: u64,
    pub page_size: u64,
    /// Frame numbers were compared (else the exclusive bit).
    pub by_pfn: bool,
    pub scan_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SharedWithParent,
    Copied,
    New,
    SharedOther,
}

/// One child page against the parent's entry at the same address (`None`: not present in the
/// child).
fn classify(child: u64, parent: u64, by_pfn: bool) -> Option<Kind> {
    if child & PRESENT == 0 {
        return None;
    }
    let parent_present = parent & PRESENT != 0;
    if by_pfn {
        if parent_present && parent & PFN_MASK == child & PFN_MASK {
            return Some(Kind::SharedWithParent);
        }
        if child & EXCLUSIVE == 0 {
            return Some(Kind::SharedOther);
        }
    } else if child & EXCLUSIVE == 0 {
        return Some(if parent_present {
            Kind::SharedWithParent
        } else {
            Kind::SharedOther
        });
    }
    Some(if parent_present {
        Kind::Copied
    } else {
        Kind::New
    })
}

/// Compares `child`'s copy-on-write mappings page by page with `parent`'s.
pub fn fork_share(child: i32, parent: i32) -> io::Result<ForkShare> {
    let t0 = crate::clock::monotonic_ns();
    let maps = read_maps(child).map_err(|e| io::Error::other(e.message))?;
    let mut c = PagemapReader::open(child)?;
    let mut p = PagemapReader::open(parent)?;
    let ps = c.page_size;
    let (mut ce, mut pe) = (
        Vec::with_capacity(CHUNK_PAGES),
        Vec::with_capacity(CHUNK_PAGES),
    );
    let mut out = ForkShare {
        page_size: ps,
        ..ForkShare::default()
    };
    let mut pfn_known: Option<bool> = None;
    for m in maps.iter().filter(|m| is_cow_mapping(m)) {
        let (first, last) = (m.start / ps, m.end.div_ceil(ps));
        let mut page = first;
        while page < last {
            let n = ((last - page) as usize).min(CHUNK_PAGES);
            c.read(page, n, &mut ce)?;
            p.read(page, n, &mut pe)?;
            // Frame numbers are all zero for a reader without CAP_SYS_ADMIN: the first present page
            // decides.
            if pfn_known.is_none() {
                pfn_known = ce
                    .iter()
                    .find(|&&e| e & PRESENT != 0)
                    .map(|&e| e & PFN_MASK != 0);
            }
            let by_pfn = pfn_known.unwrap_or(false);
            for (&ec, &ep) in ce.iter().zip(pe.iter()) {
                let Some(kind) = classify(ec, ep, by_pfn) else {
                    continue;
                };
                out.present_pages += 1;
                match kind {
                    Kind::SharedWithParent => out.shared_with_parent_pages += 1,
                    Kind::Copied => out.copied_pages += 1,
                    Kind::New => out.new_pages += 1,
                    Kind::SharedOther => out.shared_other_pages += 1,
                }
            }
            page += n as u64;
        }
    }
    out.by_pfn = pfn_known.unwrap_or(false);
    out.scan_ns = crate::clock::monotonic_ns().saturating_sub(t0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::forked::{Forked, Mapping};

    #[test]
    fn classifies_against_the_parent() {
        let p = PRESENT;
        // With frame numbers.
        assert_eq!(classify(0, p | 5, true), None);
        assert_eq!(classify(p | 5, p | 5, true), Some(Kind::SharedWithParent));
        assert_eq!(classify(p | EXCLUSIVE | 6, p | 5, true), Some(Kind::Copied));
        assert_eq!(classify(p | EXCLUSIVE | 6, 0, true), Some(Kind::New));
        assert_eq!(classify(p | 6, p | 5, true), Some(Kind::SharedOther));
        // Without: the exclusive bit.
        assert_eq!(classify(p, p, false), Some(Kind::SharedWithParent));
        assert_eq!(classify(p, 0, false), Some(Kind::SharedOther));
        assert_eq!(classify(p | EXCLUSIVE, p, false), Some(Kind::Copied));
        assert_eq!(classify(p | EXCLUSIVE, 0, false), Some(Kind::New));
    }

    /// A forked child of this test process: half of an inherited mapping written (copied), a fresh
    /// mapping of its own (new), the rest untouched (shared with the parent).
    #[test]
    fn counts_a_forked_child_since_fork() {
        let pages = 256;
        let mapping = Mapping::new(pages, 1);
        let forked = Forked::spawn(|| {
            mapping.fill(0..pages / 2, 2);
            // Left mapped: the child exits with it.
            std::mem::forget(Mapping::new(100, 3));
        });
        forked.step();
        let share = fork_share(forked.pid, std::process::id() as i32);
        drop(forked);
        let s = share.unwrap();
        // The test process has other inherited pages too (its heap, stacks of threads): bounds, not
        // equality, except where only this test's mappings can contribute.
        assert!(s.copied_pages >= (pages / 2) as u64, "{s:?}");
        assert!(s.new_pages >= 100, "{s:?}");
        assert!(s.shared_with_parent_pages >= (pages / 2) as u64, "{s:?}");
    }
}
