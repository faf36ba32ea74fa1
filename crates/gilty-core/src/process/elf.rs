//! Symbols and sections of the ELF file that holds the interpreter (libpython or the python
//! executable).

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

pub struct ElfInfo {
    pub path: String,
    /// Lowest PT_LOAD virtual address (page-aligned); the load bias is map start − this.
    pub first_load_vaddr: u64,
    pub is_pie_or_shared: bool,
    symbols: Vec<(String, u64, u64)>,
    pub pyruntime_section: Option<(u64, u64)>,
    /// The file, mapped; `.rodata` is scanned in place for version strings on interpreters without
    /// `Py_Version`.
    file: Mapped,
    rodata: Option<(usize, usize)>,
}

/// The symbols gilty needs (all exported); the rest of a 7 MB symbol table is not kept.
const WANTED: &[&str] = &["_PyRuntime", "PyCode_Type", "Py_Version"];

fn collect_symbols<'d>(
    syms: impl Iterator<Item = object::Symbol<'d, 'd>>,
    into: &mut Vec<(String, u64, u64)>,
) {
    for sym in syms {
        if let Ok(name) = sym.name() {
            if WANTED.contains(&name)
                && sym.address() != 0
                && !into.iter().any(|(n, _, _)| n == name)
            {
                into.push((name.to_owned(), sym.address(), sym.size()));
            }
        }
    }
}

/// A file mapped read-only (also the native unwinder's module files). Mapped, not read: a libpython
/// with debug information is ~30 MB, and copying it made attaching (and so `gilty dump`) take tens
/// of milliseconds more than it needs.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    pub fn open(path: &str) -> std::io::Result<Mapped> {
        use std::os::unix::fs::OpenOptionsExt;
        // The target names these paths (its maps; a FIFO planted as "lib.so (deleted)"): opened
        // without waiting for a writer, and only a regular file is mapped.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let len = meta.len() as usize;
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "empty file",
            ));
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh private read-only mapping of a file we opened; unmapped on drop. The
        // mapping outlives the fd (closed when `file` drops), as mmap allows.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped { ptr, len })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until drop. A file truncated while mapped would
        // fault; interpreter binaries are not rewritten in place (installers replace the file).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

// SAFETY: a read-only mapping, never written through, unmapped only on drop.
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

impl ElfInfo {
    pub fn read(path: &str) -> std::io::Result<ElfInfo> {
        let mapped = Mapped::open(path)?;
        let data = mapped.bytes();
        let file = object::File::parse(data)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        let mut symbols: Vec<(String, u64, u64)> = Vec::new();
        collect_symbols(file.dynamic_symbols(), &mut symbols);
        // The full symbol table (tens of thousands of entries) only when a name is missing from the
        // dynamic one, as in an executable that exports nothing.
        if symbols.len() < WANTED.len() {
            collect_symbols(file.symbols(), &mut symbols);
        }
        let first_load_vaddr = file
            .segments()
            .map(|s| s.address())
            .min()
            .map(|a| a & !0xfff)
            .unwrap_or(0);
        let pyruntime_section = file
            .section_by_name(".PyRuntime")
            .map(|s| (s.address(), s.size()));
        let rodata = file
            .section_by_name(".rodata")
            .and_then(|s| s.file_range())
            .map(|(off, size)| (off as usize, size as usize))
            .filter(|(off, size)| off.checked_add(*size).is_some_and(|end| end <= data.len()));
        let is_pie_or_shared = matches!(file.kind(), object::ObjectKind::Dynamic);
        drop(file);
        Ok(ElfInfo {
            path: path.to_owned(),
            first_load_vaddr,
            is_pie_or_shared,
            symbols,
            pyruntime_section,
            file: mapped,
            rodata,
        })
    }

    /// (address, size) of a symbol, as linked (add the load bias for the runtime address).
    pub fn symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.symbols
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, a, s)| (*a, *s))
    }

    /// Finds a "3.X.Y" release string (PY_VERSION) in .rodata, for 3.10, which has no `Py_Version`.
    pub fn scan_version(&self) -> Option<(u8, u8, u8)> {
        let (off, size) = self.rodata?;
        let d = &self.file.bytes()[off..off + size];
        let mut i = 0;
        while i + 6 < d.len() {
            // PY_VERSION sits as its own NUL-terminated literal: "\03.10.13\0".
            if d[i] == 0 && d[i + 1] == b'3' && d[i + 2] == b'.' {
                let end = d[i + 1..].iter().position(|&b| b == 0).map(|p| i + 1 + p);
                if let Some(end) = end {
                    if let Ok(s) = std::str::from_utf8(&d[i + 1..end]) {
                        if let Some(v) = parse_release(s) {
                            return Some(v);
                        }
                    }
                }
            }
            i += 1;
        }
        None
    }
}

/// Parses "3.10.13" (optionally followed by a suffix such as "+" or "rc1") into numbers.
pub fn parse_release(s: &str) -> Option<(u8, u8, u8)> {
    if s.len() > 12 {
        return None;
    }
    let mut parts = s.splitn(3, '.');
    let major: u8 = parts.next()?.parse().ok()?;
    let minor: u8 = parts.next()?.parse().ok()?;
    let rest = parts.next()?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let tail = &rest[digits.len()..];
    if digits.is_empty()
        || !(tail.is_empty()
            || tail == "+"
            || tail.starts_with('a')
            || tail.starts_with('b')
            || tail.starts_with("rc"))
    {
        return None;
    }
    Some((major, minor, digits.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings() {
        assert_eq!(parse_release("3.10.13"), Some((3, 10, 13)));
        assert_eq!(parse_release("3.11.2+"), Some((3, 11, 2)));
        assert_eq!(parse_release("3.13.0rc1"), Some((3, 13, 0)));
        assert_eq!(parse_release("3.x"), None);
        assert_eq!(parse_release("3.10.13 (main, Jan"), None);
    }
}
