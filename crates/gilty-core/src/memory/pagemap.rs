//! `/proc/PID/pagemap`: one 64-bit entry per virtual page, read in bulk (one `pread` per chunk of
//! pages). Bits (Documentation/admin-guide/mm/pagemap.rst):
//!
//! - 63 present, 62 swapped, 61 file-backed or shared-anonymous page,
//! - 56 exclusively mapped (Linux 4.2+): this process is the only one mapping the page. A page a
//!   forked worker still shares with its master is present but not exclusive; once the worker
//!   writes to it, the kernel gives it a private copy and the bit is set. It needs no privilege.
//! - 55 soft-dirty, 0–54 page frame number (zero unless the reader has CAP_SYS_ADMIN).
//!
//! Reading pagemap does not fault pages in or change the target in any way.

use crate::process::maps::MapEntry;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub const PRESENT: u64 = 1 << 63;
pub const SWAPPED: u64 = 1 << 62;
pub const FILE_OR_SHARED: u64 = 1 << 61;
pub const EXCLUSIVE: u64 = 1 << 56;
pub const SOFT_DIRTY: u64 = 1 << 55;
pub const PFN_MASK: u64 = (1 << 55) - 1;

/// Page size of this machine (4096 on x86-64).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// An open `/proc/PID/pagemap`.
pub struct PagemapReader {
    file: File,
    bytes: Vec<u8>,
    pub page_size: u64,
}

impl PagemapReader {
    pub fn open(pid: i32) -> io::Result<PagemapReader> {
        Ok(PagemapReader {
            file: File::open(format!("/proc/{pid}/pagemap"))?,
            bytes: Vec::new(),
            page_size: page_size(),
        })
    }

    /// The entries of `count` pages starting at virtual page number `first_page`, into `out`
    /// (replacing its contents). Pages outside any mapping read as 0 (not present).
    pub fn read(&mut self, first_page: u64, count: usize, out: &mut Vec<u64>) -> io::Result<()> {
        let len = count * 8;
        if self.bytes.len() < len {
            self.bytes.resize(len, 0);
        }
        let mut done = 0;
        while done < len {
            let n = self
                .file
                .read_at(&mut self.bytes[done..len], first_page * 8 + done as u64)?;
            if n == 0 {
                // The process exited (its mm is gone) or the range is past the end of user space.
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            done += n;
        }
        out.clear();
        out.extend(
            self.bytes[..len]
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap())),
        );
        Ok(())
    }
}

/// Page counts of one or more address ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub pages: u64,
    pub present: u64,
    /// Present and mapped by this process only.
    pub exclusive: u64,
    /// Present and mapped by other processes too (still shared since fork, or shared file pages).
    pub shared: u64,
    pub swapped: u64,
    pub soft_dirty: u64,
    pub file_or_shared: u64,
}

impl PageCounts {
    pub fn add_entry(&mut self, e: u64) {
        self.pages += 1;
        if e & PRESENT != 0 {
            self.present += 1;
            if e & EXCLUSIVE != 0 {
                self.exclusive += 1;
            } else {
                self.shared += 1;
            }
        }
        if e & SWAPPED != 0 {
            self.swapped += 1;
        }
        if e & SOFT_DIRTY != 0 {
            self.soft_dirty += 1;
        }
        if e & FILE_OR_SHARED != 0 {
            self.file_or_shared += 1;
        }
    }
}

/// Pages read per `pread` (8 KiB of entries = 4 MiB of address space).
pub const CHUNK_PAGES: usize = 1024;

/// Counts the pages of the byte ranges `[start, end)` (page-aligned by the caller or rounded
/// outwards).
pub fn count_ranges(reader: &mut PagemapReader, ranges: &[(u64, u64)]) -> io::Result<PageCounts> {
    let ps = reader.page_size;
    let mut counts = PageCounts::default();
    let mut entries = Vec::with_capacity(CHUNK_PAGES);
    for &(start, end) in ranges {
        let (first, last) = (start / ps, end.div_ceil(ps));
        let mut page = first;
        while page < last {
            let n = ((last - page) as usize).min(CHUNK_PAGES);
            reader.read(page, n, &mut entries)?;
            for &e in &entries {
                counts.add_entry(e);
            }
            page += n as u64;
        }
    }
    Ok(counts)
}

/// Mappings whose pages a fork shares copy-on-write: private and writable (the heap, pymalloc
/// arenas, glibc malloc's mmaps, libraries' .data/.bss). Not the stack or the kernel's vdso/vvar.
pub fn is_cow_mapping(m: &MapEntry) -> bool {
    let p = m.perms.as_bytes();
    if p.len() < 4 || p[1] != b'w' || p[3] != b'p' {
        return false;
    }
    !matches!(
        m.path.as_deref(),
        Some("[stack]")
            | Some("[vvar]")
            | Some("[vdso]")
            | Some("[vsyscall]")
            | Some("[vvar_vclock]")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::maps::read_maps;

    #[test]
    fn counts_entry_bits() {
        let mut c = PageCounts::default();
        c.add_entry(PRESENT | EXCLUSIVE | 42);
        c.add_entry(PRESENT);
        c.add_entry(SWAPPED);
        c.add_entry(0);
        c.add_entry(PRESENT | FILE_OR_SHARED | SOFT_DIRTY);
        assert_eq!(
            c,
            PageCounts {
                pages: 5,
                present: 3,
                exclusive: 1,
                shared: 2,
                swapped: 1,
                soft_dirty: 1,
                file_or_shared: 1
            }
        );
    }

    #[test]
    fn selects_private_writable_mappings() {
        let m = |perms: &str, path: Option<&str>| MapEntry {
            start: 0,
            end: 4096,
            perms: perms.into(),
            offset: 0,
            path: path.map(Into::into),
        };
        assert!(is_cow_mapping(&m("rw-p", None)));
        assert!(is_cow_mapping(&m("rw-p", Some("[heap]"))));
        assert!(is_cow_mapping(&m(
            "rw-p",
            Some("/usr/lib/libpython3.12.so")
        )));
        assert!(!is_cow_mapping(&m("rw-s", None)));
        assert!(!is_cow_mapping(&m("r--p", None)));
        assert!(!is_cow_mapping(&m("rw-p", Some("[stack]"))));
    }

    #[test]
    fn own_written_pages_are_present_and_exclusive() {
        let ps = page_size() as usize;
        let mut buf = vec![0u8; 64 * ps];
        for i in (0..buf.len()).step_by(ps) {
            buf[i] = 1;
        }
        let start = (buf.as_ptr() as u64).div_ceil(ps as u64) * ps as u64;
        let end = start + 32 * ps as u64;
        let mut r = PagemapReader::open(std::process::id() as i32).unwrap();
        let c = count_ranges(&mut r, &[(start, end)]).unwrap();
        assert_eq!(c.pages, 32);
        assert_eq!(c.present, 32);
        assert_eq!(c.exclusive, 32);
        assert!(read_maps(std::process::id() as i32)
            .unwrap()
            .iter()
            .any(is_cow_mapping));
        std::hint::black_box(&buf);
    }
}
