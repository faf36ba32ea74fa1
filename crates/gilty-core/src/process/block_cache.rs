//! Reads of one stack walk served from a few blocks, each read from the target in one go.
//!
//! A read of /proc/PID/mem costs the same few microseconds for 64 bytes as for a page, so a walk
//! that reads a page where it needed a frame header gets the neighbouring frames for free: 3.11+
//! frames sit next to each other in the thread's data-stack chunk (loaded whole with `load`), and
//! 3.10 frame objects share pymalloc pools. Bytes read together are also one snapshot, which makes
//! a walk more consistent, not less; a caller that needs a fresh value reads the inner memory.

use crate::process::memory::Memory;
use std::cell::RefCell;
use std::io;

/// Granularity of a miss: mappings are page-aligned, so an aligned 4 KiB block holding a readable
/// byte is readable whole (4 KiB divides every x86-64/arm64 page size).
const BLOCK: u64 = 4096;
/// A read spanning more than this goes straight to the target instead of being cached.
const MAX_MISS: u64 = 4 * BLOCK;

pub struct BlockCache<'a> {
    inner: &'a dyn Memory,
    /// (start address, bytes), newest last; a walk touches a handful.
    blocks: RefCell<Vec<(u64, Vec<u8>)>>,
}

impl<'a> BlockCache<'a> {
    pub fn new(inner: &'a dyn Memory) -> Self {
        BlockCache {
            inner,
            blocks: RefCell::new(Vec::new()),
        }
    }

    /// Reads `[addr, addr + len)` in one read and serves later reads inside it from the copy.
    pub fn load(&self, addr: u64, len: usize) -> io::Result<()> {
        let bytes = self.inner.read_vec(addr, len)?;
        self.blocks.borrow_mut().push((addr, bytes));
        Ok(())
    }

    /// How many reads of the target this cache made (for tests).
    pub fn blocks(&self) -> usize {
        self.blocks.borrow().len()
    }

    /// The same blocks read again from the target: a second copy of everything this one holds.
    pub fn reread(&self) -> io::Result<BlockCache<'a>> {
        let again = BlockCache::new(self.inner);
        for (start, bytes) in self.blocks.borrow().iter() {
            again.load(*start, bytes.len())?;
        }
        Ok(again)
    }

    /// (start, length) of every block read, oldest first.
    pub fn ranges(&self) -> Vec<(u64, usize)> {
        self.blocks
            .borrow()
            .iter()
            .map(|(start, bytes)| (*start, bytes.len()))
            .collect()
    }

    /// Copies `[addr, addr + buf.len())` out of the blocks already read; false (and no read of the
    /// target) when they do not hold it.
    pub fn read_cached(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.copy_from_cache(addr, buf)
    }

    fn copy_from_cache(&self, addr: u64, buf: &mut [u8]) -> bool {
        let blocks = self.blocks.borrow();
        for (start, bytes) in blocks.iter().rev() {
            let Some(off) = addr.checked_sub(*start) else {
                continue;
            };
            let off = off as usize;
            if let Some(src) = off
                .checked_add(buf.len())
                .and_then(|end| bytes.get(off..end))
            {
                buf.copy_from_slice(src);
                return true;
            }
        }
        false
    }
}

impl Memory for BlockCache<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.copy_from_cache(addr, buf) {
            return Ok(());
        }
        let end = addr
            .checked_add(buf.len() as u64)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let start = addr & !(BLOCK - 1);
        let stop = end
            .checked_add(BLOCK - 1)
            .map(|e| e & !(BLOCK - 1))
            .unwrap_or(end);
        if stop - start > MAX_MISS {
            return self.inner.read(addr, buf);
        }
        self.load(start, (stop - start) as usize)?;
        let ok = self.copy_from_cache(addr, buf);
        debug_assert!(ok);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::BufferMemory;

    fn memory() -> BufferMemory {
        BufferMemory {
            base: 0x10000,
            bytes: (0..4 * BLOCK as usize).map(|i| (i % 251) as u8).collect(),
        }
    }

    #[test]
    fn serves_reads_within_a_block_from_one_read() {
        let mem = memory();
        let cache = BlockCache::new(&mem);
        assert_eq!(cache.read_u8(0x10010).unwrap(), 0x10);
        assert_eq!(
            cache.read_vec(0x10100, 8).unwrap(),
            mem.read_vec(0x10100, 8).unwrap()
        );
        assert_eq!(
            cache.read_u64(0x10ff8).unwrap(),
            mem.read_u64(0x10ff8).unwrap()
        );
        assert_eq!(cache.blocks(), 1);
        // Straddling into the next block reads both.
        assert_eq!(
            cache.read_vec(0x10ffc, 8).unwrap(),
            mem.read_vec(0x10ffc, 8).unwrap()
        );
        assert_eq!(cache.blocks(), 2);
    }

    #[test]
    fn loaded_region_is_used_and_misses_outside_the_mapping_fail() {
        let mem = memory();
        let cache = BlockCache::new(&mem);
        cache.load(0x10200, 0x300).unwrap();
        assert_eq!(
            cache.read_vec(0x10400, 0x100).unwrap(),
            mem.read_vec(0x10400, 0x100).unwrap()
        );
        assert_eq!(cache.blocks(), 1);
        assert!(cache.read_u64(0x10000 + 4 * BLOCK).is_err());
        assert!(cache.read_u64(0x1000).is_err());
    }
}
