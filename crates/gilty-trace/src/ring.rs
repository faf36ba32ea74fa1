//! One perf ring buffer: `mmap(fd, (1 + 2^n) pages)`, read without blocking.
//!
//! The first page is `struct perf_event_mmap_page` (linux/perf_event.h); the data area follows. The
//! kernel advances `data_head`; we read records between our `data_tail` and `data_head` and then
//! store the new `data_tail`, which frees the space. Protocol from the header's comment on
//! `data_head`: read `data_head`, then `smp_rmb()` (here: an acquire load), read the records, then
//! `smp_mb()` and write `data_tail` (here: a release store, which orders the preceding record reads
//! before the store).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// `offsetof(struct perf_event_mmap_page, data_head)`: 1 KiB, after `__u8 __reserved[116*8]`
/// ("align to 1k").
pub const OFF_DATA_HEAD: usize = 1024;
/// `__u64 data_tail;` — user-space written tail.
pub const OFF_DATA_TAIL: usize = 1032;
/// `__u64 data_offset;` — where the buffer starts (0 on kernels before 4.1: then one page).
pub const OFF_DATA_OFFSET: usize = 1040;
/// `__u64 data_size;` — data buffer size (0 on kernels before 4.1).
pub const OFF_DATA_SIZE: usize = 1048;

/// `struct perf_event_header { __u32 type; __u16 misc; __u16 size; }`
pub const HEADER_SIZE: usize = 8;

pub struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    /// Holds a record that wraps around the end of the data area.
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this struct and only touched through &mut self (or read-only
// fields).
unsafe impl Send for Ring {}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ps > 0 {
        ps as usize
    } else {
        4096
    }
}

impl Ring {
    /// Maps `data_pages` (a power of two) data pages plus the control page of the perf event `fd`.
    pub fn map(fd: RawFd, data_pages: usize) -> io::Result<Ring> {
        if data_pages == 0 || !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring pages must be a power of two",
            ));
        }
        let ps = page_size();
        let len = (data_pages + 1) * ps;
        // SAFETY: a fresh shared mapping of a perf fd; PROT_WRITE is needed to publish data_tail (a
        // read-only mapping would make the kernel overwrite unread data instead of stopping and
        // reporting loss).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as *mut u8;
        // SAFETY: the control page is mapped; these u64 fields are 8-aligned.
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(OFF_DATA_OFFSET) as *const u64) as usize,
                std::ptr::read_volatile(base.add(OFF_DATA_SIZE) as *const u64) as usize,
            )
        };
        let (data_offset, data_size) = if size == 0 {
            (ps, data_pages * ps)
        } else {
            (off, size)
        };
        Ok(Ring {
            base,
            len,
            data_offset,
            data_size,
            scratch: Vec::new(),
        })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 in the mapped control page that lives as long as
        // self.
        unsafe { &*(self.base.add(OFF_DATA_HEAD) as *const AtomicU64) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as above for data_tail.
        unsafe { &*(self.base.add(OFF_DATA_TAIL) as *const AtomicU64) }
    }

    /// Bytes written by the kernel and not yet consumed.
    pub fn pending(&self) -> u64 {
        self.head()
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail().load(Ordering::Relaxed))
    }

    /// Calls `f(type, record)` for every complete record (header included, contiguous even when it
    /// wrapped in the buffer), then frees the space. Never blocks.
    pub fn drain(&mut self, mut f: impl FnMut(u32, &[u8])) {
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        let size = self.data_size as u64;
        // SAFETY: data area lies within the mapping.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
        while tail < head {
            let pos = (tail % size) as usize;
            // Records are 8-byte aligned and data_size is a multiple of 8, so the header never
            // wraps.
            let rtype = u32::from_ne_bytes(data[pos..pos + 4].try_into().unwrap());
            let rsize = u16::from_ne_bytes(data[pos + 6..pos + 8].try_into().unwrap()) as usize;
            if rsize < HEADER_SIZE || (rsize as u64) > head - tail {
                // Corrupt or torn; skip everything that is there rather than loop.
                tail = head;
                break;
            }
            if pos + rsize <= data.len() {
                f(rtype, &data[pos..pos + rsize]);
            } else {
                let first = data.len() - pos;
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[pos..]);
                self.scratch.extend_from_slice(&data[..rsize - first]);
                f(rtype, &self.scratch);
            }
            tail += rsize as u64;
        }
        self.tail().store(tail, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `map`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}
