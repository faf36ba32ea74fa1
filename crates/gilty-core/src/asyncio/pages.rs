//! A page cache over the target's memory for one pass over every task: tasks, coroutines and their
//! frames sit close together on the heap, so reading whole pages once turns tens of thousands of
//! small reads into a few thousand. Keyed by page number (a `BlockCache` searches its blocks
//! linearly, fine for one stack walk but not for a heap pass).

use crate::process::memory::Memory;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;

/// Hashes an address or page number by one multiplication: keys are already well spread numbers,
/// and SipHash was a tenth of a pass over 10,000 tasks.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by target addresses.
pub type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;
pub type AddrSet = std::collections::HashSet<u64, BuildHasherDefault<AddrHasher>>;

const PAGE: u64 = 4096;
/// Pages read together on a miss in a dump: one read of the target costs far more than the bytes
/// it copies, and a task's neighbours on the heap are usually the next tasks read.
pub const DUMP_CHUNK_PAGES: u64 = 32;

pub struct PageCache<'a> {
    inner: &'a dyn Memory,
    /// Whole chunks by chunk number (None: the chunk is not all mapped, see `pages`).
    chunks: RefCell<AddrMap<Option<Box<[u8]>>>>,
    chunk_pages: u64,
    /// Single pages of chunks that could not be read whole (None: unreadable page).
    pages: RefCell<AddrMap<Option<Box<[u8]>>>>,
}

thread_local! {
    /// Chunk buffers of dropped caches, reused: fresh 128 KiB buffers cost a page fault per page.
    static SPARE: RefCell<Vec<Box<[u8]>>> = const { RefCell::new(Vec::new()) };
}

/// Spare buffers kept for the next cache (a sampling pass makes a cache every pass).
const MAX_SPARE_BYTES: usize = 8 << 20;

fn chunk_buffer(chunk_pages: u64) -> Box<[u8]> {
    let len = (chunk_pages * PAGE) as usize;
    SPARE
        .with(|s| s.borrow_mut().pop())
        .filter(|b| b.len() == len)
        .unwrap_or_else(|| vec![0u8; len].into_boxed_slice())
}

impl Drop for PageCache<'_> {
    fn drop(&mut self) {
        let chunks = std::mem::take(&mut *self.chunks.borrow_mut());
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            for bytes in chunks.into_values().flatten() {
                if s.len() * bytes.len() >= MAX_SPARE_BYTES {
                    break;
                }
                s.push(bytes);
            }
        });
    }
}

impl<'a> PageCache<'a> {
    pub fn new(inner: &'a dyn Memory) -> Self {
        Self::with_chunk(inner, DUMP_CHUNK_PAGES)
    }

    /// A cache that reads `chunk_pages` pages (at least 1) on each miss.
    pub fn with_chunk(inner: &'a dyn Memory, chunk_pages: u64) -> Self {
        PageCache {
            inner,
            chunks: RefCell::new(AddrMap::default()),
            chunk_pages: chunk_pages.max(1),
            pages: RefCell::new(AddrMap::default()),
        }
    }

    /// Pages read from the target so far.
    pub fn pages(&self) -> usize {
        let whole = self
            .chunks
            .borrow()
            .values()
            .filter(|c| c.is_some())
            .count()
            * self.chunk_pages as usize;
        whole + self.pages.borrow().values().filter(|p| p.is_some()).count()
    }

    /// Copies from one page into `buf`; false when the page cannot be read. A read is one moment of
    /// the target: what was read once is served from the copy.
    fn copy_page(&self, page: u64, off: usize, buf: &mut [u8]) -> bool {
        let n = self.chunk_pages;
        let chunk_no = page / n;
        let mut chunks = self.chunks.borrow_mut();
        let chunk = chunks.entry(chunk_no).or_insert_with(|| {
            let mut bytes = chunk_buffer(n);
            self.inner
                .read(chunk_no * n * PAGE, &mut bytes)
                .ok()
                .map(|_| bytes)
        });
        if let Some(bytes) = chunk {
            let at = ((page % n) * PAGE) as usize + off;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            return true;
        }
        drop(chunks);
        let mut pages = self.pages.borrow_mut();
        let entry = pages.entry(page).or_insert_with(|| {
            let mut bytes = vec![0u8; PAGE as usize].into_boxed_slice();
            self.inner.read(page * PAGE, &mut bytes).ok().map(|_| bytes)
        });
        match entry {
            Some(bytes) => {
                buf.copy_from_slice(&bytes[off..off + buf.len()]);
                true
            }
            None => false,
        }
    }
}

impl Memory for PageCache<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        // Large reads (a set's table) go straight to the target.
        if buf.len() as u64 > 2 * PAGE {
            return self.inner.read(addr, buf);
        }
        let mut done = 0usize;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let off = (at % PAGE) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            if !self.copy_page(at / PAGE, off, &mut buf[done..done + n]) {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::BufferMemory;

    #[test]
    fn reads_across_pages_and_counts_them() {
        let bytes: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8).collect();
        let mem = BufferMemory {
            base: 0x10000,
            bytes: bytes.clone(),
        };
        let c = PageCache::new(&mem);
        let mut buf = [0u8; 16];
        c.read(0x10000 + PAGE - 8, &mut buf).unwrap();
        assert_eq!(&buf[..], &bytes[PAGE as usize - 8..PAGE as usize + 8]);
        assert_eq!(c.pages(), 2);
        assert!(c.read(0x10000 + 3 * PAGE, &mut buf).is_err());
    }
}
