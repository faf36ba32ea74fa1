//! Reading another process's memory with process_vm_readv: no ptrace stop, no writes.

use std::io;

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

pub struct ProcessMemory {
    pub pid: i32,
}

impl Memory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: the local iovec points at `buf`, which we own for the call; the remote side is only read.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != buf.len() {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read from target memory"));
        }
        Ok(())
    }
}

/// A byte buffer standing in for an address space starting at `base` (for decoder tests).
pub struct BufferMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl Memory for BufferMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let off = addr.checked_sub(self.base).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))? as usize;
        let end = off.checked_add(buf.len()).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let src = self.bytes.get(off..end).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}
