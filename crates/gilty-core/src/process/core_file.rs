//! An ELF core file (`gcore`, systemd-coredump, the kernel's own) read as the address space of the
//! process it was taken from: the same `Memory` trait as /proc/PID/mem, a maps list built from the
//! core's NT_FILE note, and each thread's id and registers from its NT_PRSTATUS note.
//!
//! Cores leave out the pages of file mappings that were never written (`coredump_filter`'s default
//! keeps only the first page of each ELF file): text and read-only data are read from the mapped
//! files themselves, at the offsets NT_FILE gives. Those files are looked for under `sysroot` first,
//! and the executable's path can be replaced outright (a core moved to another machine, a
//! container's paths).

use crate::error::{Error, ErrorKind, Result};
use crate::process::elf::Mapped;
use crate::process::maps::MapEntry;
use crate::process::memory::Memory;
use crate::process::procfs::SyscallState;
use std::collections::HashMap;
use std::io;
use std::sync::Mutex;

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const ET_CORE: u16 = 4;
const EM_X86_64: u16 = 62;
const NT_PRSTATUS: u32 = 1;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_FILE: u32 = 0x4649_4c45;
const AT_ENTRY: u64 = 9;
/// Offset of `pr_reg` in x86-64's `struct elf_prstatus`, and of the registers gilty reads in it
/// (`struct user_regs_struct`).
const PRSTATUS_PID: usize = 32;
const PRSTATUS_REG: usize = 112;
const REG_RBP: usize = 4;
const REG_RDI: usize = 14;
const REG_ORIG_RAX: usize = 15;
const REG_RIP: usize = 16;
const REG_RSP: usize = 19;
/// `struct elf_prpsinfo` (x86-64): pid, command name (16 bytes), arguments (80 bytes).
const PRPSINFO_PID: usize = 24;
const PRPSINFO_FNAME: usize = 40;
const PRPSINFO_ARGS: usize = 56;

/// One PT_LOAD segment: `filesz` bytes of it are in the core at `offset`; the rest of `memsz` was
/// not dumped.
#[derive(Debug, Clone, Copy)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
    flags: u32,
}

/// A file mapping from NT_FILE: [start, end) maps `path` from byte `offset`.
#[derive(Debug, Clone)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// A thread as the core has it. Registers are x86-64's; other machines have none here.
#[derive(Debug, Clone, Copy)]
pub struct CoreThread {
    pub tid: i32,
    /// The syscall it was blocked in (from `orig_rax` and its first argument, as
    /// /proc/PID/syscall gives them live), `Running` when it was in user space, `Unavailable`
    /// when the core has no registers gilty can read.
    pub syscall: SyscallState,
    pub pc: u64,
    pub sp: u64,
    /// The frame pointer register (0 when unknown).
    pub bp: u64,
}

pub struct CoreFile {
    pub path: String,
    core: Mapped,
    segments: Vec<Segment>,
    pub files: Vec<FileMapping>,
    pub threads: Vec<CoreThread>,
    pub pid: i32,
    /// The command name and arguments (NT_PRPSINFO), when present.
    pub command: Option<String>,
    /// The executable as the process mapped it (the file mapping holding AT_ENTRY), or the path
    /// given instead.
    pub executable: Option<String>,
    exe_override: Option<String>,
    sysroot: Option<String>,
    /// Mapped files opened so far (None: missing or not the file the process mapped).
    opened: Mutex<HashMap<String, Option<std::sync::Arc<Mapped>>>>,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A one-line error about the core file itself.
fn core_error(path: &str, what: &str) -> Error {
    Error::new(ErrorKind::NotPython, format!("{path}: {what}"))
}

impl CoreFile {
    /// Opens and parses `path`. `exe` replaces the executable's path; `sysroot` is tried as a
    /// prefix of every mapped file's path first.
    pub fn open(path: &str, exe: Option<&str>, sysroot: Option<&str>) -> Result<CoreFile> {
        let core = Mapped::open(path).map_err(|e| {
            let kind = if e.kind() == io::ErrorKind::NotFound {
                ErrorKind::NoSuchProcess
            } else {
                ErrorKind::NotPython
            };
            Error::new(kind, format!("cannot read core file {path}: {e}"))
        })?;
        let mut c = CoreFile {
            path: path.to_owned(),
            core,
            segments: Vec::new(),
            files: Vec::new(),
            threads: Vec::new(),
            pid: 0,
            command: None,
            executable: None,
            exe_override: exe.map(str::to_owned),
            sysroot: sysroot.map(|s| s.trim_end_matches('/').to_owned()),
            opened: Mutex::new(HashMap::new()),
        };
        c.parse()
            .map_err(|e| core_error(path, &format!("not a readable ELF core file ({e})")))?;
        if c.threads.is_empty() {
            return Err(core_error(
                path,
                "the core has no threads (no NT_PRSTATUS note)",
            ));
        }
        if let Some(exe) = exe {
            if !std::path::Path::new(exe).is_file() {
                return Err(Error::new(
                    ErrorKind::NoSuchProcess,
                    format!("--exe {exe}: no such file"),
                ));
            }
        }
        Ok(c)
    }

    fn parse(&mut self) -> io::Result<()> {
        let b = self.core.bytes();
        if b.len() < 64 || &b[..4] != b"\x7fELF" {
            return Err(bad("no ELF header"));
        }
        if b[4] != 2 || b[5] != 1 {
            return Err(bad("not a 64-bit little-endian ELF file"));
        }
        let e_type = le_u16(b, 16).unwrap_or(0);
        if e_type != ET_CORE {
            return Err(bad("an ELF file, but not a core"));
        }
        let machine = le_u16(b, 18).unwrap_or(0);
        let phoff = le_u64(b, 32).unwrap_or(0) as usize;
        let phentsize = le_u16(b, 54).unwrap_or(0) as usize;
        let phnum = le_u16(b, 56).unwrap_or(0) as usize;
        if phentsize < 56 || phnum == 0 {
            return Err(bad("no program headers"));
        }
        let mut notes = Vec::new();
        for i in 0..phnum {
            let at = phoff.saturating_add(i * phentsize);
            let h = b
                .get(at..at.saturating_add(56))
                .ok_or_else(|| bad("truncated program headers"))?;
            let kind = le_u32(h, 0).unwrap();
            let seg = Segment {
                flags: le_u32(h, 4).unwrap(),
                offset: le_u64(h, 8).unwrap(),
                vaddr: le_u64(h, 16).unwrap(),
                filesz: le_u64(h, 32).unwrap(),
                memsz: le_u64(h, 40).unwrap(),
            };
            match kind {
                PT_LOAD => self.segments.push(seg),
                PT_NOTE => notes.push((seg.offset as usize, seg.filesz as usize)),
                _ => {}
            }
        }
        let mut entry = None;
        for (off, len) in notes {
            let data = b
                .get(off..off.saturating_add(len))
                .ok_or_else(|| bad("truncated: a note segment lies past the end of the file"))?;
            let mut at = 0;
            while at + 12 <= data.len() {
                let namesz = le_u32(data, at).unwrap() as usize;
                let descsz = le_u32(data, at + 4).unwrap() as usize;
                let kind = le_u32(data, at + 8).unwrap();
                let desc_at = (at + 12).saturating_add(namesz.div_ceil(4) * 4);
                let Some(desc) = data.get(desc_at..desc_at.saturating_add(descsz)) else {
                    return Err(bad("truncated note"));
                };
                at = desc_at.saturating_add(descsz.div_ceil(4) * 4);
                match kind {
                    NT_PRSTATUS => self.threads.push(thread(desc, machine)),
                    NT_PRPSINFO if desc.len() >= PRPSINFO_ARGS + 80 => {
                        self.pid = le_u32(desc, PRPSINFO_PID).unwrap() as i32;
                        let fname = c_string(&desc[PRPSINFO_FNAME..PRPSINFO_FNAME + 16]);
                        let args = c_string(&desc[PRPSINFO_ARGS..PRPSINFO_ARGS + 80]);
                        self.command = Some(if args.is_empty() { fname } else { args });
                    }
                    NT_AUXV => {
                        entry = desc
                            .chunks_exact(16)
                            .find(|kv| le_u64(kv, 0) == Some(AT_ENTRY))
                            .and_then(|kv| le_u64(kv, 8));
                    }
                    NT_FILE => self.files = file_note(desc).ok_or_else(|| bad("bad NT_FILE"))?,
                    _ => {}
                }
            }
        }
        // The segments' data must be there: a core cut short (disk full, a copy interrupted).
        let end = self
            .segments
            .iter()
            .map(|s| s.offset.saturating_add(s.filesz))
            .max()
            .unwrap_or(0);
        if end > b.len() as u64 {
            return Err(bad(format!(
                "truncated: its segments need {end} bytes, the file has {}",
                b.len()
            )));
        }
        if self.pid == 0 {
            self.pid = self.threads.first().map_or(0, |t| t.tid);
        }
        self.segments.sort_by_key(|s| s.vaddr);
        self.executable = entry
            .and_then(|e| self.files.iter().find(|f| f.start <= e && e < f.end))
            .or_else(|| self.files.first())
            .map(|f| f.path.clone());
        Ok(())
    }

    /// The process's mappings, as /proc/PID/maps would list them: file mappings from NT_FILE, the
    /// rest from the core's segments (permissions from the segments' flags).
    pub fn maps(&self) -> Vec<MapEntry> {
        let perms = |addr: u64| flags_text(self.segment(addr).map_or(0, |s| s.flags));
        let mut out: Vec<MapEntry> = self
            .files
            .iter()
            .map(|f| {
                let path = self.mapped_path(&f.path);
                // gcore writes no segment at all for the file mappings it leaves out (text, read-only
                // data): their permissions are those of the file's own segment at that offset.
                let perms = if self.segment(f.start).is_some() {
                    perms(f.start)
                } else {
                    self.file(&path)
                        .and_then(|m| file_segment_flags(m.bytes(), f.offset))
                        .map_or_else(|| "---p".to_owned(), flags_text)
                };
                MapEntry {
                    start: f.start,
                    end: f.end,
                    perms,
                    offset: f.offset,
                    path: Some(path),
                }
            })
            .collect();
        for s in &self.segments {
            if !self
                .files
                .iter()
                .any(|f| f.start < s.vaddr.saturating_add(s.memsz) && s.vaddr < f.end)
            {
                out.push(MapEntry {
                    start: s.vaddr,
                    end: s.vaddr.saturating_add(s.memsz),
                    perms: perms(s.vaddr),
                    offset: 0,
                    path: None,
                });
            }
        }
        out.sort_by_key(|m| m.start);
        out
    }

    /// The executable's path as attach uses it (the one given with `--exe`, else the mapped one).
    pub fn executable_path(&self) -> Option<String> {
        self.executable.as_deref().map(|e| self.mapped_path(e))
    }

    /// The path the process mapped, or the one given in its place (`--exe`).
    fn mapped_path(&self, path: &str) -> String {
        match (&self.exe_override, &self.executable) {
            (Some(exe), Some(orig)) if orig == path => exe.clone(),
            _ => path.to_owned(),
        }
    }

    /// Where to read a file the process mapped (already passed through `mapped_path`): under the
    /// sysroot when it is there, else the path itself.
    pub fn local_path(&self, path: &str) -> String {
        if let Some(root) = &self.sysroot {
            let under = format!("{root}{path}");
            if std::path::Path::new(&under).exists() {
                return under;
            }
        }
        path.to_owned()
    }

    /// The mapped files that cannot be read here (missing, or not the file the process mapped).
    pub fn missing_files(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .files
            .iter()
            .map(|f| self.mapped_path(&f.path))
            .collect();
        paths.dedup();
        paths
            .into_iter()
            .filter(|p| self.file(p).is_none())
            .collect()
    }

    /// The file, mapped, once; None when missing or when its first page differs from the one the
    /// core kept (another build of the file: reading it would give wrong code and strings).
    fn file(&self, path: &str) -> Option<std::sync::Arc<Mapped>> {
        let mut opened = self.opened.lock().unwrap();
        if let Some(f) = opened.get(path) {
            return f.clone();
        }
        let found = Mapped::open(&self.local_path(path))
            .ok()
            .filter(|m| self.same_first_page(path, m.bytes()))
            .map(std::sync::Arc::new);
        opened.insert(path.to_owned(), found.clone());
        found
    }

    fn same_first_page(&self, path: &str, file: &[u8]) -> bool {
        let Some(m) = self
            .files
            .iter()
            .find(|f| f.offset == 0 && self.mapped_path(&f.path) == path)
        else {
            return true;
        };
        // The ELF header and program headers: enough to tell builds apart (their sizes differ).
        let len = 512.min(file.len());
        match self.dumped(m.start, len) {
            Some(kept) => kept == &file[..len],
            None => true,
        }
    }

    /// Bytes the core itself holds for [addr, addr+len), all in one segment.
    fn dumped(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let s = self.segment(addr)?;
        let rel = addr - s.vaddr;
        if rel.saturating_add(len as u64) > s.filesz {
            return None;
        }
        let at = s.offset.checked_add(rel)? as usize;
        self.core.bytes().get(at..at.checked_add(len)?)
    }

    fn segment(&self, addr: u64) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.vaddr <= addr);
        let s = self.segments.get(i.checked_sub(1)?)?;
        (addr < s.vaddr.saturating_add(s.memsz)).then_some(s)
    }

    /// Reads as much of `buf` as one segment or file mapping gives from `addr`; the count read.
    fn read_piece(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
        let seg = self.segment(addr);
        if let Some(s) = seg {
            let rel = addr - s.vaddr;
            if rel < s.filesz {
                let n = buf.len().min((s.filesz - rel) as usize);
                // Within the file: `parse` checked every segment's data against its size.
                let at = (s.offset + rel) as usize;
                buf[..n].copy_from_slice(&self.core.bytes()[at..at + n]);
                return Ok(n);
            }
        }
        // Not in the core: a file mapping's page that was never written, read from the file.
        let limit = seg.map_or(u64::MAX, |s| s.vaddr.saturating_add(s.memsz));
        if let Some(f) = self.files.iter().find(|f| f.start <= addr && addr < f.end) {
            let path = self.mapped_path(&f.path);
            let file = self.file(&path).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{path}, which the core does not hold, is missing here"),
                )
            })?;
            let at = f.offset.saturating_add(addr - f.start);
            let end = f.end.min(limit);
            let n = buf.len().min((end - addr) as usize);
            // Past the file's end the mapping reads as zeros (the kernel's page tail).
            let bytes = file.bytes();
            let have = (bytes.len() as u64).saturating_sub(at).min(n as u64) as usize;
            if have > 0 {
                let at = at as usize;
                buf[..have].copy_from_slice(&bytes[at..at + have]);
            }
            buf[have..n].fill(0);
            return Ok(n);
        }
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("address {addr:#x} is not in the core"),
        ))
    }
}

impl Memory for CoreFile {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_piece(addr.wrapping_add(done as u64), &mut buf[done..])?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            done += n;
        }
        Ok(())
    }
}

/// Segment flags (PF_R 4, PF_W 2, PF_X 1) as /proc/PID/maps writes them.
fn flags_text(f: u32) -> String {
    let bit = |m: u32, c: char| if f & m != 0 { c } else { '-' };
    format!("{}{}{}p", bit(4, 'r'), bit(2, 'w'), bit(1, 'x'))
}

/// The flags of the PT_LOAD segment of an ELF file (64-bit, little-endian) whose file range holds
/// `offset`.
fn file_segment_flags(elf: &[u8], offset: u64) -> Option<u32> {
    if elf.get(..4)? != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return None;
    }
    let phoff = le_u64(elf, 32)? as usize;
    let phentsize = le_u16(elf, 54)? as usize;
    let phnum = le_u16(elf, 56)? as usize;
    (0..phnum).find_map(|i| {
        let h = elf.get(phoff.checked_add(i * phentsize)?..)?;
        let (kind, flags, off, filesz) =
            (le_u32(h, 0)?, le_u32(h, 4)?, le_u64(h, 8)?, le_u64(h, 32)?);
        // Mappings start on page boundaries: the segment's first page may begin below its offset.
        let first = off & !0xfff;
        (kind == PT_LOAD && first <= offset && offset < off.saturating_add(filesz)).then_some(flags)
    })
}

/// A thread from its NT_PRSTATUS: the tid, and on x86-64 the syscall it was in (`orig_rax` is -1
/// outside one; inside, the kernel keeps the number there and the first argument in `rdi`).
fn thread(desc: &[u8], machine: u16) -> CoreThread {
    let tid = le_u32(desc, PRSTATUS_PID).unwrap_or(0) as i32;
    let reg = |i: usize| le_u64(desc, PRSTATUS_REG + 8 * i);
    if machine != EM_X86_64 {
        return CoreThread {
            tid,
            syscall: SyscallState::Unavailable,
            pc: 0,
            sp: 0,
            bp: 0,
        };
    }
    let syscall = match (reg(REG_ORIG_RAX), reg(REG_RDI)) {
        (Some(nr), Some(arg0)) if (nr as i64) >= 0 => SyscallState::Blocked {
            nr: nr as i64,
            arg0,
        },
        (Some(_), Some(_)) => SyscallState::Running,
        _ => SyscallState::Unavailable,
    };
    CoreThread {
        tid,
        syscall,
        pc: reg(REG_RIP).unwrap_or(0),
        sp: reg(REG_RSP).unwrap_or(0),
        bp: reg(REG_RBP).unwrap_or(0),
    }
}

/// NT_FILE: count, page size, count × (start, end, offset in pages), then count NUL-ended paths.
fn file_note(desc: &[u8]) -> Option<Vec<FileMapping>> {
    let count = le_u64(desc, 0)? as usize;
    let page = le_u64(desc, 8)?;
    if count > desc.len() / 24 {
        return None;
    }
    let mut names = desc.get(16 + count * 24..)?.split(|&c| c == 0);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = 16 + i * 24;
        out.push(FileMapping {
            start: le_u64(desc, at)?,
            end: le_u64(desc, at + 8)?,
            offset: le_u64(desc, at + 16)?.checked_mul(page)?,
            path: String::from_utf8_lossy(names.next()?).into_owned(),
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_note_parses_ranges_and_paths() {
        let mut d = Vec::new();
        for v in [2u64, 4096, 0x1000, 0x3000, 0, 0x5000, 0x6000, 2] {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d.extend_from_slice(b"/usr/bin/python3\0/lib/libc.so.6\0");
        let f = file_note(&d).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].offset, 2 * 4096);
        assert_eq!(f[1].path, "/lib/libc.so.6");
        // A count larger than the note can hold is refused, not allocated.
        d[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(file_note(&d).is_none());
    }

    fn note(kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend_from_slice(&5u32.to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&kind.to_le_bytes());
        n.extend_from_slice(b"CORE\0\0\0\0");
        n.extend_from_slice(desc);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n
    }

    fn phdr(kind: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&kind.to_le_bytes());
        h.extend_from_slice(&6u32.to_le_bytes());
        for v in [offset, vaddr, 0, filesz, memsz, 4096] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h
    }

    /// A core as the kernel lays one out: a thread blocked in futex, one dumped anonymous page and
    /// a two-page file mapping not dumped (read from `file` at its NT_FILE offset, page 1).
    fn synthetic_core(file: &str) -> Vec<u8> {
        let mut prstatus = vec![0u8; 336];
        prstatus[PRSTATUS_PID..PRSTATUS_PID + 4].copy_from_slice(&4242u32.to_le_bytes());
        let reg = |i: usize| PRSTATUS_REG + 8 * i;
        prstatus[reg(REG_ORIG_RAX)..reg(REG_ORIG_RAX) + 8].copy_from_slice(&202u64.to_le_bytes());
        prstatus[reg(REG_RDI)..reg(REG_RDI) + 8].copy_from_slice(&0x10008u64.to_le_bytes());
        let mut nt_file = Vec::new();
        for v in [1u64, 4096, 0x20000, 0x22000, 1] {
            nt_file.extend_from_slice(&v.to_le_bytes());
        }
        nt_file.extend_from_slice(file.as_bytes());
        nt_file.push(0);
        let mut notes = note(NT_PRSTATUS, &prstatus);
        notes.extend(note(NT_FILE, &nt_file));
        let notes_at = 64 + 3 * 56;
        let data_at = 0x1000u64;
        let mut core = vec![0u8; 64];
        core[..4].copy_from_slice(b"\x7fELF");
        core[4] = 2;
        core[5] = 1;
        core[6] = 1;
        core[16..18].copy_from_slice(&ET_CORE.to_le_bytes());
        core[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        core[32..40].copy_from_slice(&64u64.to_le_bytes());
        core[54..56].copy_from_slice(&56u16.to_le_bytes());
        core[56..58].copy_from_slice(&3u16.to_le_bytes());
        core.extend(phdr(PT_NOTE, notes_at as u64, 0, notes.len() as u64, 0));
        core.extend(phdr(PT_LOAD, data_at, 0x10000, 0x1000, 0x1000));
        core.extend(phdr(PT_LOAD, data_at + 0x1000, 0x20000, 0, 0x2000));
        core.extend(notes);
        core.resize(data_at as usize, 0);
        core.extend((0..0x1000).map(|i| (i % 251) as u8));
        core
    }

    #[test]
    fn reads_memory_threads_and_unsaved_file_pages() {
        let dir = std::env::temp_dir().join(format!("gilty-core-synth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("lib.so");
        let mapped: Vec<u8> = (0..3 * 4096).map(|i| (i / 4096) as u8 + 1).collect();
        std::fs::write(&lib, &mapped).unwrap();
        let core_path = dir.join("core");
        let bytes = synthetic_core(lib.to_str().unwrap());
        std::fs::write(&core_path, &bytes).unwrap();
        let c = CoreFile::open(core_path.to_str().unwrap(), None, None).unwrap();
        assert_eq!(c.pid, 4242, "no NT_PRPSINFO: the first thread's tid");
        assert_eq!(c.threads.len(), 1);
        assert_eq!(
            c.threads[0].syscall,
            SyscallState::Blocked {
                nr: 202,
                arg0: 0x10008
            }
        );
        assert_eq!(c.read_u8(0x10005).unwrap(), 5);
        // Not in the core: page 1 of the file, as NT_FILE maps it.
        assert_eq!(c.read_u8(0x20010).unwrap(), 2);
        assert_eq!(c.read_u8(0x21010).unwrap(), 3);
        assert!(c.read_u8(0x30000).is_err());
        assert!(
            c.read_vec(0x10ff0, 0x20).is_err(),
            "runs past the dumped page"
        );
        let maps = c.maps();
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[1].path.as_deref(), lib.to_str());
        assert_eq!(maps[1].offset, 4096);
        // The mapped file gone: its pages cannot be read, and it is named.
        std::fs::remove_file(&lib).unwrap();
        let c = CoreFile::open(core_path.to_str().unwrap(), None, None).unwrap();
        let e = c.read_u8(0x20010).unwrap_err();
        assert!(e.to_string().contains("lib.so"), "{e}");
        assert_eq!(c.missing_files(), vec![lib.to_str().unwrap().to_owned()]);
        // Cut short: refused at open.
        std::fs::write(&core_path, &bytes[..bytes.len() - 100]).unwrap();
        let e = CoreFile::open(core_path.to_str().unwrap(), None, None)
            .err()
            .unwrap();
        assert!(e.message.contains("truncated"), "{}", e.message);
        // Any byte of the headers and notes changed: an error or a core, never a panic.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut bad = bytes.clone();
            let at = (seed % 700) as usize;
            bad[at] = (seed >> 32) as u8;
            std::fs::write(&core_path, &bad).unwrap();
            if let Ok(c) = CoreFile::open(core_path.to_str().unwrap(), None, None) {
                let _ = c.read_vec(0x10000, 64);
                let _ = c.read_vec(0x20000, 64);
                let _ = c.maps();
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn not_a_core_is_one_error() {
        let dir = std::env::temp_dir().join(format!("gilty-core-test-{}", std::process::id()));
        std::fs::write(&dir, b"not an ELF file at all, just text").unwrap();
        let e = CoreFile::open(dir.to_str().unwrap(), None, None)
            .err()
            .unwrap();
        assert!(
            e.message.contains("not a readable ELF core"),
            "{}",
            e.message
        );
        // An ELF file that is not a core (this test binary).
        let exe = std::env::current_exe().unwrap();
        let e = CoreFile::open(exe.to_str().unwrap(), None, None)
            .err()
            .unwrap();
        assert!(e.message.contains("not a core"), "{}", e.message);
        std::fs::remove_file(dir).unwrap();
    }
}
