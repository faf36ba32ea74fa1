//! A page cache over the target's memory for one pass over every task: tasks, coroutines and their
//! frames sit close together on the heap, so reading whole pages once turns tens of thousands of small
//! reads into a few thousand. Keyed by page number (a `BlockCache` searches its blocks linearly, fine
//! for one stack walk but not for a heap pass).

use crate::process::memory::Memory;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;

const PAGE: u64 = 4096;

pub struct PageCache<'a> {
    inner: &'a dyn Memory,
    pages: RefCell<HashMap<u64, Option<Box<[u8]>>>>,
}

impl<'a> PageCache<'a> {
    pub fn new(inner: &'a dyn Memory) -> Self {
        PageCache { inner, pages: RefCell::new(HashMap::new()) }
    }

    /// Pages read from the target so far.
    pub fn pages(&self) -> usize {
        self.pages.borrow().len()
    }

    /// Copies from one page into `buf`; false when the page cannot be read.
    fn copy_page(&self, page: u64, off: usize, buf: &mut [u8]) -> bool {
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
        let mem = BufferMemory { base: 0x10000, bytes: bytes.clone() };
        let c = PageCache::new(&mem);
        let mut buf = [0u8; 16];
        c.read(0x10000 + PAGE - 8, &mut buf).unwrap();
        assert_eq!(&buf[..], &bytes[PAGE as usize - 8..PAGE as usize + 8]);
        assert_eq!(c.pages(), 2);
        assert!(c.read(0x10000 + 3 * PAGE, &mut buf).is_err());
    }
}
