//! Function name → (file, file offset) for a uprobe.
//!
//! The kernel's uprobe PMU takes a path and a *file offset* (attr.config1/config2). A symbol's
//! value is a virtual address as linked; the offset is `vaddr - p_vaddr + p_offset` of the
//! `PT_LOAD` segment holding it. Symbols come from `.symtab`, else `.dynsym`, else from separate
//! debug info found by build-id or `.gnu_debuglink` (the debug file's symbol values are the same
//! link-time addresses; the offset is always computed from the segments of the file the target
//! maps, after checking that the debug file describes that file: same build-id / matching debuglink
//! CRC, and the section holding the symbol at the same address).

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SegmentFlags, SymbolKind};

use crate::error::TraceError;

/// What a uprobe is attached to: a path openable by us (the tracer) and a file offset in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// A path to the very file the target maps, valid in our mount namespace (usually
    /// `/proc/PID/root<path>`, or `/proc/PID/map_files/<range>` when the file on disk was
    /// replaced).
    pub path: String,
    /// File offset of the probed instruction.
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSymbol {
    pub target: ProbeTarget,
    /// The symbol actually used: the requested name, or a GCC clone of it (`take_gil.constprop.0`).
    pub symbol: String,
    /// The separate debug file the symbol came from, when the mapped file had no such symbol.
    pub from_debug_file: Option<String>,
}

/// Resolves `symbol` in the file `path_in_target` as mapped by process `pid` (a path from
/// /proc/PID/maps).
pub fn resolve(pid: i32, path_in_target: &str, symbol: &str) -> Result<ResolvedSymbol, TraceError> {
    let roots = vec![format!("/proc/{pid}/root"), String::new()];
    resolve_with_roots(pid, path_in_target, symbol, &roots)
}

/// `resolve`, looking for debug files under each of `debug_roots` (path prefixes: the target's
/// root, then ours). Separate so tests can point it at a scratch directory.
pub(crate) fn resolve_with_roots(
    pid: i32,
    path_in_target: &str,
    symbol: &str,
    debug_roots: &[String],
) -> Result<ResolvedSymbol, TraceError> {
    let open_path = openable_path(pid, path_in_target)?;
    let not_found = |hint: String| TraceError::SymbolNotFound {
        symbol: symbol.to_owned(),
        path: path_in_target.to_owned(),
        hint,
    };
    let map = MappedFile::open(&open_path).map_err(|e| {
        TraceError::TargetGone(format!("cannot read {path_in_target} ({open_path}): {e}"))
    })?;
    let file = object::File::parse(map.bytes())
        .map_err(|e| not_found(format!("not an ELF file we can read: {e}")))?;

    let found = find_symbol(&file, symbol);
    let (name, vaddr, debug_file) = match found {
        Found::One(name, vaddr) => (name, vaddr, None),
        Found::Ambiguous(names) => return Err(not_found(ambiguous_hint(&names))),
        Found::None => {
            let stripped = file.section_by_name(".symtab").is_none();
            let mut tried = Vec::new();
            let mut hit = None;
            for cand in debug_candidates(&file, path_in_target, debug_roots) {
                let Ok(dmap) = MappedFile::open(&cand.path) else {
                    continue;
                };
                let Ok(dfile) = object::File::parse(dmap.bytes()) else {
                    continue;
                };
                if !debug_file_matches(&file, &dfile, dmap.bytes(), cand.crc) {
                    tried.push(format!("{} (does not match)", cand.path));
                    continue;
                }
                match find_symbol(&dfile, symbol) {
                    Found::One(name, vaddr) => {
                        if !same_section_address(&file, &dfile, vaddr) {
                            tried.push(format!("{} (section addresses differ)", cand.path));
                            continue;
                        }
                        hit = Some((name, vaddr, cand.path.clone()));
                        break;
                    }
                    Found::Ambiguous(names) => return Err(not_found(ambiguous_hint(&names))),
                    Found::None => tried.push(format!("{} (no such symbol)", cand.path)),
                }
            }
            match hit {
                Some((name, vaddr, dpath)) => (name, vaddr, Some(dpath)),
                None => {
                    let what = if stripped {
                        "stripped"
                    } else {
                        "not in .symtab or .dynsym"
                    };
                    let hint = if tried.is_empty() {
                        format!("{what}, no debug info found")
                    } else {
                        format!("{what}; debug info tried: {}", tried.join(", "))
                    };
                    return Err(not_found(hint));
                }
            }
        }
    };
    let offset = file_offset(&file, vaddr).ok_or_else(|| {
        not_found(format!(
            "{name} at {vaddr:#x} is not inside an executable PT_LOAD segment"
        ))
    })?;
    Ok(ResolvedSymbol {
        target: ProbeTarget {
            path: open_path,
            offset,
        },
        symbol: name,
        from_debug_file: debug_file,
    })
}

fn ambiguous_hint(names: &[String]) -> String {
    format!("ambiguous: several GCC clones {}", names.join(", "))
}

/// A path to the file the target maps, usable from our mount namespace.
pub(crate) fn openable_path(pid: i32, path_in_target: &str) -> Result<String, TraceError> {
    let clean = path_in_target
        .strip_suffix(" (deleted)")
        .unwrap_or(path_in_target);
    // The mapping in the target, if any: (address range, inode).
    let mapping = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .ok()
        .and_then(|maps| {
            maps.lines().find_map(|line| {
                let mut it = line.splitn(6, ' ');
                let range = it.next()?;
                let _perms = it.next()?;
                let _off = it.next()?;
                let _dev = it.next()?;
                let inode: u64 = it.next()?.parse().ok()?;
                let name = it.next()?.trim_start();
                (name == path_in_target).then(|| (range.to_owned(), inode))
            })
        });
    let via_root = format!("/proc/{pid}/root{clean}");
    if let Ok(md) = std::fs::metadata(&via_root) {
        match &mapping {
            Some((_, inode)) if *inode != md.ino() => {}
            _ => return Ok(via_root),
        }
    }
    if let Some((range, _)) = &mapping {
        // The exact inode the target maps, even when the file on disk was replaced or deleted.
        let mf = format!("/proc/{pid}/map_files/{}", map_files_name(range));
        if File::open(&mf).is_ok() {
            return Ok(mf);
        }
    }
    if std::fs::metadata(clean).is_ok() {
        return Ok(clean.to_owned());
    }
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(TraceError::TargetGone(format!("process {pid} exited")));
    }
    Err(TraceError::TargetGone(format!(
        "cannot open {path_in_target} as mapped by process {pid}"
    )))
}

/// A maps range as `/proc/PID/map_files` names it: maps pads addresses to 8 digits
/// (`00400000-0041f000`, a non-PIE executable's), map_files does not (`400000-41f000`).
fn map_files_name(range: &str) -> String {
    let trim = |a: &str| {
        let t = a.trim_start_matches('0');
        if t.is_empty() {
            "0".to_owned()
        } else {
            t.to_owned()
        }
    };
    match range.split_once('-') {
        Some((a, b)) => format!("{}-{}", trim(a), trim(b)),
        None => range.to_owned(),
    }
}

enum Found {
    One(String, u64),
    Ambiguous(Vec<String>),
    None,
}

/// Exact name in .symtab, then .dynsym; else a unique `symbol.` clone (`.constprop.N`, `.isra.N`,
/// `.part.N`; never `.cold`, which is a split-off fragment, not an entry point).
fn find_symbol(file: &object::File, want: &str) -> Found {
    let mut clones: Vec<(String, u64)> = Vec::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.is_undefined()
            || sym.address() == 0
            || !matches!(sym.kind(), SymbolKind::Text | SymbolKind::Unknown)
        {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name == want {
            return Found::One(name.to_owned(), sym.address());
        }
        if let Some(rest) = name.strip_prefix(want) {
            if rest.starts_with('.')
                && !rest.contains(".cold")
                && !clones.iter().any(|(_, a)| *a == sym.address())
            {
                clones.push((name.to_owned(), sym.address()));
            }
        }
    }
    match clones.len() {
        0 => Found::None,
        1 => {
            let (n, a) = clones.pop().unwrap();
            Found::One(n, a)
        }
        _ => {
            let mut names: Vec<String> = clones.into_iter().map(|(n, _)| n).collect();
            names.sort();
            Found::Ambiguous(names)
        }
    }
}

/// `vaddr - p_vaddr + p_offset` of the executable PT_LOAD segment whose file-backed part holds
/// `vaddr`.
pub(crate) fn file_offset(file: &object::File, vaddr: u64) -> Option<u64> {
    for seg in file.segments() {
        let (off, filesz) = seg.file_range();
        let start = seg.address();
        let exec = match seg.flags() {
            SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
            _ => true,
        };
        if exec && vaddr >= start && vaddr < start + filesz {
            return Some(vaddr - start + off);
        }
    }
    None
}

/// The path of an installed separate debug file (build-id path or `.gnu_debuglink`, under each of
/// `roots`) that belongs to `file` (same build-id, or the debuglink CRC), if any.
pub fn matching_debug_file(
    file: &object::File,
    path_in_target: &str,
    roots: &[String],
) -> Option<String> {
    for cand in debug_candidates(file, path_in_target, roots) {
        let Ok(bytes) = std::fs::read(&cand.path) else {
            continue;
        };
        let Ok(dfile) = object::File::parse(&*bytes) else {
            continue;
        };
        if debug_file_matches(file, &dfile, &bytes, cand.crc) {
            return Some(cand.path);
        }
    }
    None
}

pub(crate) struct DebugCandidate {
    pub(crate) path: String,
    /// CRC from .gnu_debuglink, when found that way.
    pub(crate) crc: Option<u32>,
}

pub(crate) fn debug_candidates(
    file: &object::File,
    path_in_target: &str,
    roots: &[String],
) -> Vec<DebugCandidate> {
    let mut out = Vec::new();
    if let Ok(Some(id)) = file.build_id() {
        if id.len() >= 2 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            for root in roots {
                out.push(DebugCandidate {
                    path: format!(
                        "{root}/usr/lib/debug/.build-id/{}/{}.debug",
                        &hex[..2],
                        &hex[2..]
                    ),
                    crc: None,
                });
            }
        }
    }
    if let Ok(Some((name, crc))) = file.gnu_debuglink() {
        if let Ok(name) = std::str::from_utf8(name) {
            let clean = path_in_target
                .strip_suffix(" (deleted)")
                .unwrap_or(path_in_target);
            let dir = std::path::Path::new(clean)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dir = dir.trim_end_matches('/');
            for root in roots {
                for p in [
                    format!("{root}{dir}/{name}"),
                    format!("{root}{dir}/.debug/{name}"),
                    format!("{root}/usr/lib/debug{dir}/{name}"),
                ] {
                    out.push(DebugCandidate {
                        path: p,
                        crc: Some(crc),
                    });
                }
            }
        }
    }
    // The same file reached through two roots (target in our mount namespace) is tried once.
    let mut seen: Vec<(u64, u64)> = Vec::new();
    out.retain(|c| match std::fs::metadata(&c.path) {
        Ok(md) => {
            let key = (md.dev(), md.ino());
            if seen.contains(&key) {
                false
            } else {
                seen.push(key);
                true
            }
        }
        Err(_) => false,
    });
    out
}

/// The debug file belongs to the mapped file: equal build-ids when both have one, else the
/// debuglink CRC.
pub(crate) fn debug_file_matches(
    file: &object::File,
    dfile: &object::File,
    dbytes: &[u8],
    crc: Option<u32>,
) -> bool {
    let a = file.build_id().ok().flatten();
    let b = dfile.build_id().ok().flatten();
    if let (Some(a), Some(b)) = (a, b) {
        return a == b;
    }
    match crc {
        Some(c) => crc32(dbytes) == c,
        None => false,
    }
}

/// The debug file's section holding `vaddr` sits at the same address in the mapped file (when the
/// mapped file still has section headers; stripped files keep them).
pub(crate) fn same_section_address(file: &object::File, dfile: &object::File, vaddr: u64) -> bool {
    let Some(dsec) = dfile
        .sections()
        .find(|s| s.address() != 0 && vaddr >= s.address() && vaddr < s.address() + s.size())
    else {
        return false;
    };
    let Ok(name) = dsec.name() else { return false };
    match file.section_by_name(name) {
        Some(sec) => sec.address() == dsec.address() && sec.size() == dsec.size(),
        None => file.sections().next().is_none(),
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib and `.gnu_debuglink` use).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut c = !0u32;
    for &b in data {
        c = table[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// A read-only private mapping of a whole file (libpython with DWARF is tens of MB; no copy).
pub(crate) struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    pub(crate) fn open(path: &str) -> io::Result<MappedFile> {
        use std::os::fd::AsRawFd;
        let f = File::open(path)?;
        let len = f.metadata()?.len() as usize;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty file"));
        }
        // SAFETY: read-only private mapping of an open file; the fd may be closed afterwards.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedFile { ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is valid for len bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping what open() mapped.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const LIB311: &str = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0";

    #[test]
    fn map_files_names_drop_the_padding() {
        assert_eq!(map_files_name("00400000-0041f000"), "400000-41f000");
        assert_eq!(
            map_files_name("7f1c2d400000-7f1c2d4e5000"),
            "7f1c2d400000-7f1c2d4e5000"
        );
        assert_eq!(map_files_name("00000000-00001000"), "0-1000");
    }

    fn me() -> i32 {
        std::process::id() as i32
    }

    fn nm_addr(path: &str, sym: &str) -> Option<u64> {
        let out = Command::new("nm").arg(path).output().ok()?;
        String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            let mut it = l.split_whitespace();
            let a = it.next()?;
            let _t = it.next()?;
            (it.next()? == sym)
                .then(|| u64::from_str_radix(a, 16).ok())
                .flatten()
        })
    }

    #[test]
    fn crc32_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn exact_and_clone_symbols() {
        if !std::path::Path::new(LIB311).exists() {
            eprintln!("SKIP 3.11.7: not installed");
            return;
        }
        let r = resolve(me(), LIB311, "take_gil").unwrap();
        assert_eq!(r.symbol, "take_gil");
        assert_eq!(r.from_debug_file, None);
        // libpython3.11's PT_LOAD text segment has p_offset == p_vaddr.
        if let Some(a) = nm_addr(LIB311, "take_gil") {
            assert_eq!(r.target.offset, a);
        }
        let c = resolve(me(), LIB311, "_local_create_dummy").unwrap();
        assert_eq!(c.symbol, "_local_create_dummy.isra.0");
        match resolve(me(), LIB311, "stringlib_default_rfind") {
            Err(TraceError::SymbolNotFound { hint, .. }) => {
                assert!(hint.contains("ambiguous"), "{hint}")
            }
            other => panic!("expected ambiguity, got {other:?}"),
        }
        match resolve(me(), LIB311, "no_such_function_xyz") {
            Err(TraceError::SymbolNotFound { hint, .. }) => {
                assert!(hint.contains("not in .symtab"), "{hint}")
            }
            other => panic!("expected not found, got {other:?}"),
        }
    }

    /// Strip a copy of libpython, keep its symbols in a separate debug file, and find them through
    /// `.gnu_debuglink` (same directory, `.debug/` subdirectory) and through a build-id tree.
    #[test]
    fn follows_separate_debug_info() {
        if !std::path::Path::new(LIB311).exists() {
            eprintln!("SKIP 3.11.7: not installed");
            return;
        }
        let have = |t: &str| {
            Command::new(t)
                .arg("--version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        if !have("objcopy") || !have("strip") {
            eprintln!("SKIP debug-info test: binutils missing");
            return;
        }
        let want = resolve(me(), LIB311, "take_gil").unwrap().target.offset;
        let dir = std::env::temp_dir().join(format!("gilty-trace-dbg-{}", me()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".debug")).unwrap();
        let lib = dir.join("libpy.so");
        let dbg = dir.join(".debug").join("libpy.so.debug");
        let run = |args: &[&std::ffi::OsStr], tool: &str| {
            let st = Command::new(tool).args(args).status().unwrap();
            assert!(st.success(), "{tool} {args:?}");
        };
        std::fs::copy(LIB311, &lib).unwrap();
        run(
            &[
                "--only-keep-debug".as_ref(),
                lib.as_os_str(),
                dbg.as_os_str(),
            ],
            "objcopy",
        );
        run(&["--strip-all".as_ref(), lib.as_os_str()], "strip");
        // --add-gnu-debuglink looks the file up relative to the cwd; give it the full path.
        let link = format!("--add-gnu-debuglink={}", dbg.display());
        run(&[link.as_ref(), lib.as_os_str()], "objcopy");
        let libs = lib.to_str().unwrap();

        let r = resolve_with_roots(me(), libs, "take_gil", &[String::new()]).unwrap();
        assert_eq!(r.target.offset, want);
        assert_eq!(r.from_debug_file.as_deref(), Some(dbg.to_str().unwrap()));

        // Without the debug file: the stripped message.
        let moved = dir.join("elsewhere.debug");
        std::fs::rename(&dbg, &moved).unwrap();
        match resolve_with_roots(me(), libs, "take_gil", &[String::new()]) {
            Err(e @ TraceError::SymbolNotFound { .. }) => {
                assert!(
                    e.to_string()
                        .contains("(stripped, no debug info found); install debug symbols"),
                    "{e}"
                )
            }
            other => panic!("expected SymbolNotFound, got {other:?}"),
        }

        // Build-id tree under a scratch root.
        let out = Command::new("readelf")
            .arg("-n")
            .arg(&lib)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(id) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
        {
            let root = dir.join("root");
            let bdir = root.join("usr/lib/debug/.build-id").join(&id[..2]);
            std::fs::create_dir_all(&bdir).unwrap();
            let bfile = bdir.join(format!("{}.debug", &id[2..]));
            std::fs::rename(&moved, &bfile).unwrap();
            let r =
                resolve_with_roots(me(), libs, "take_gil", &[root.to_str().unwrap().to_owned()])
                    .unwrap();
            assert_eq!(r.target.offset, want);
            assert_eq!(r.from_debug_file.as_deref(), Some(bfile.to_str().unwrap()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
