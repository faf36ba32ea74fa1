//! Reading another process's memory through /proc/PID/mem: no ptrace stop, no writes, no unsharing.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Read access to a target address space. A trait so decoders can be tested on byte buffers.
pub trait Memory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()>;

    fn read_vec(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read(addr, &mut v)?;
        Ok(v)
    }
    fn read_u64(&self, addr: u64) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn read_i64(&self, addr: u64) -> io::Result<i64> {
        Ok(self.read_u64(addr)? as i64)
    }
    fn read_u32(&self, addr: u64) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn read_i32(&self, addr: u64) -> io::Result<i32> {
        Ok(self.read_u32(addr)? as i32)
    }
    fn read_u8(&self, addr: u64) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.read(addr, &mut b)?;
        Ok(b[0])
    }
}

/// The target's memory, read through `/proc/PID/mem` (needs ptrace read access, like
/// `process_vm_readv`). Not `process_vm_readv`: it pins the pages it reads (FOLL_PIN), and since
/// Linux 5.19 pinning an anonymous page still shared copy-on-write makes the kernel unshare it
/// first, so reading a forked worker would give it private copies of the pages read.
/// `/proc/PID/mem` goes through `access_remote_vm` without pinning and leaves sharing alone (tested
/// below).
pub struct ProcessMemory {
    pub pid: i32,
    file: File,
}

impl ProcessMemory {
    pub fn open(pid: i32) -> io::Result<ProcessMemory> {
        Ok(ProcessMemory {
            pid,
            file: File::open(format!("/proc/{pid}/mem"))?,
        })
    }
}

impl Memory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.file.read_at(&mut buf[done..], addr + done as u64)?;
            if n == 0 {
                // The process is gone (its mm released) or the range ends.
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "short read from target memory",
                ));
            }
            done += n;
        }
        Ok(())
    }
}

/// A byte buffer standing in for an address space starting at `base` (for decoder tests).
pub struct BufferMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

/// Random words for robustness tests of the readers: half point back into the buffer (aligned), a
/// quarter are small numbers, the rest anything, so a reader meets cycles, wild pointers and huge
/// counts.
#[cfg(test)]
pub struct Garbage {
    seed: u64,
}

#[cfg(test)]
impl Garbage {
    pub const BASE: u64 = 0x10000;
    pub const LEN: u64 = 1 << 16;

    pub fn new(seed: u64) -> Garbage {
        Garbage { seed }
    }

    /// xorshift64: reproducible from the seed.
    pub fn next_word(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }

    pub fn buffer(&mut self) -> BufferMemory {
        let mut bytes = Vec::with_capacity(Self::LEN as usize);
        for _ in 0..Self::LEN / 8 {
            let r = self.next_word();
            let word = match r % 4 {
                0 | 1 => Self::BASE + (r >> 8) % Self::LEN / 8 * 8,
                2 => (r >> 8) & 0xff,
                _ => r,
            };
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        BufferMemory {
            base: Self::BASE,
            bytes,
        }
    }
}

impl Memory for BufferMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let off =
            addr.checked_sub(self.base)
                .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))? as usize;
        let end = off
            .checked_add(buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let src = self
            .bytes
            .get(off..end)
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::forked::{Forked, Mapping};

    /// A forked child shares 256 pages with us. Reading half of them through /proc/PID/mem leaves
    /// them shared; reading the other half with process_vm_readv makes the child copy them (5.19+).
    #[test]
    fn proc_mem_reads_do_not_unshare_pages() {
        let pages = 256;
        let mapping = Mapping::new(pages, 7);
        let (base, ps) = (mapping.base, mapping.page_size);
        let forked = Forked::spawn(|| {});
        let child = forked.pid;
        // Private bytes of the test mapping alone: the test binary's other threads keep writing to
        // their own pages after the fork, which makes the child's copies of those private too.
        let private = |pid: i32| -> u64 {
            let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
            let head = format!("{:x}-", base as usize);
            let block = smaps.split_once(&head).map(|(_, rest)| rest).unwrap_or("");
            block
                .lines()
                .skip(1)
                .take_while(|l| {
                    l.split_whitespace()
                        .next()
                        .is_some_and(|w| w.ends_with(':'))
                })
                .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
                .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024)
                .sum()
        };
        let before = private(child);
        let mem = ProcessMemory::open(child).unwrap();
        let half = (pages / 2 * ps) as u64;
        for i in 0..pages / 2 {
            assert_eq!(mem.read_u8(base as u64 + (i * ps) as u64).unwrap(), 7);
        }
        let after_proc_mem = private(child);
        for i in pages / 2..pages {
            let mut b = [0u8; 1];
            let local = libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: 1,
            };
            let remote = libc::iovec {
                iov_base: (base as usize + i * ps) as *mut libc::c_void,
                iov_len: 1,
            };
            // SAFETY: reads one byte of the child into `b`.
            assert_eq!(
                unsafe { libc::process_vm_readv(child, &local, 1, &remote, 1, 0) },
                1
            );
            assert_eq!(b[0], 7);
        }
        let after_vm_readv = private(child);
        drop(forked);
        assert!(
            after_proc_mem - before < 8 * ps as u64,
            "/proc/PID/mem reads unshared pages: {before} -> {after_proc_mem}"
        );
        // Documents the kernel behaviour this module exists for (Linux >= 5.19); older kernels
        // do not unshare, which is fine too.
        eprintln!(
            "process_vm_readv of {half} bytes made the child copy {} bytes",
            after_vm_readv.saturating_sub(after_proc_mem)
        );
    }
}
