//! Finding the CPython interpreter inside a target process, identifying its version, choosing and
//! validating the struct layout, and locating the runtime structures gilty reads.

use crate::error::{from_os, Error, ErrorKind, Result};
use crate::process::core_file::CoreFile;
use crate::process::elf::{parse_release, ElfInfo};
use crate::process::maps::{read_maps, MapEntry};
use crate::process::memory::{Memory, ProcessMemory};
use crate::process::procfs;
use crate::process::target_memory::TargetMemory;
use gilty_layouts::{debug_offsets, layout_for, Layout, SUPPORTED};

pub struct Interpreter {
    pub pid: i32,
    pub mem: TargetMemory,
    pub layout: Layout,
    pub version: (u8, u8, u8),
    /// The file that holds `_PyRuntime` (libpython or the executable).
    pub binary: String,
    pub executable: String,
    pub runtime: u64,
    pub code_type: Option<u64>,
    /// Where the GIL struct lives, and how to find it.
    pub gil: GilLocation,
    /// Fields where the generated table and the target's `_Py_DebugOffsets` disagree (3.13+).
    pub debug_offset_mismatches: Vec<String>,
    pub used_debug_offsets: bool,
}

#[derive(Debug, Clone, Copy)]
pub enum GilLocation {
    /// Embedded in `_PyRuntime` (3.10, 3.11).
    Fixed(u64),
    /// Pointed to by the main interpreter (3.12+); resolved at attach.
    Pointer { resolved: u64 },
}

impl GilLocation {
    pub fn address(&self) -> u64 {
        match *self {
            GilLocation::Fixed(a) => a,
            GilLocation::Pointer { resolved } => resolved,
        }
    }
}

/// Marks a version whose micro number could not be read (3.10 builds without a PY_VERSION literal).
pub const MICRO_UNKNOWN: u8 = u8::MAX;

fn version_string(v: (u8, u8, u8)) -> String {
    if v.2 == MICRO_UNKNOWN {
        format!("{}.{}", v.0, v.1)
    } else {
        format!("{}.{}.{}", v.0, v.1, v.2)
    }
}

/// Candidate files for the interpreter: libpython mappings first, then the main executable.
fn candidate_binaries(pid: i32, maps: &[MapEntry], exe: &Option<String>) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut push = |path: &str| {
        if out.iter().any(|(p, _)| p == path) {
            return;
        }
        // The mapping with file offset 0 gives the load address of the file's first page.
        if let Some(m) = maps
            .iter()
            .find(|m| m.path.as_deref() == Some(path) && m.offset == 0)
        {
            out.push((path.to_owned(), m.start));
        }
    };
    for m in maps {
        if let Some(name) = m.file_name() {
            if name.starts_with("libpython3") && name.contains(".so") {
                push(m.path.as_deref().unwrap());
            }
        }
    }
    if let Some(exe) = exe {
        push(exe);
    }
    let _ = pid;
    out
}

/// Path through which this process can read a file the target mapped (works across mount
/// namespaces).
fn readable_path(pid: i32, path: &str) -> String {
    let via_root = format!("/proc/{pid}/root{path}");
    if std::path::Path::new(&via_root).exists() {
        via_root
    } else {
        path.to_owned()
    }
}

struct Found {
    elf: ElfInfo,
    bias: u64,
    runtime: u64,
    runtime_size: Option<u64>,
    path: String,
}

/// A file the target still maps but that was deleted or replaced since it started (a package
/// upgrade under a running service: the kernel names it `PATH (deleted)`): read through the mapping
/// itself.
fn deleted_file_path(pid: i32, path: &str, map_start: u64, maps: &[MapEntry]) -> Option<String> {
    path.strip_suffix(" (deleted)")?;
    let m = maps
        .iter()
        .find(|m| m.start == map_start && m.path.as_deref() == Some(path))?;
    Some(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
}

/// The file to read for `path` as mapped at `map_start`.
type FileFor<'a> = &'a dyn Fn(&str, u64) -> String;

fn find_runtime(
    pid: i32,
    maps: &[MapEntry],
    exe: &Option<String>,
    file_for: FileFor,
) -> Option<Found> {
    for (path, map_start) in candidate_binaries(pid, maps, exe) {
        let file = file_for(&path, map_start);
        let Ok(elf) = ElfInfo::read(&file) else {
            continue;
        };
        let bias = if elf.is_pie_or_shared {
            map_start.wrapping_sub(elf.first_load_vaddr)
        } else {
            0
        };
        let (addr, size) = match elf.symbol("_PyRuntime") {
            Some((a, s)) => (a, if s > 0 { Some(s) } else { None }),
            None => match elf.pyruntime_section {
                Some((a, s)) => (a, Some(s)),
                None => continue,
            },
        };
        return Some(Found {
            runtime: bias.wrapping_add(addr),
            runtime_size: size,
            elf,
            bias,
            path,
        });
    }
    None
}

fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|(a, b)| format!("{a}.{b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "2.7" when the process runs an interpreter older than 3.7, which has no `_PyRuntime` to find: a
/// libpython or executable named for it (python2.7, libpython3.6m.so). Told apart from "not Python"
/// so that it exits as unsupported (5), not as some other program (4).
fn older_python(maps: &[MapEntry], exe: &Option<String>) -> Option<String> {
    let names = maps
        .iter()
        .filter_map(|m| m.file_name())
        .chain(exe.as_deref().map(|e| e.rsplit('/').next().unwrap_or(e)));
    for name in names {
        let Some(rest) = name
            .strip_prefix("libpython")
            .or_else(|| name.strip_prefix("python"))
        else {
            continue;
        };
        let mut parts = rest.splitn(2, '.');
        let major = parts.next().and_then(|m| m.parse::<u8>().ok());
        let minor = parts
            .next()
            .map(|r| r.split(|c: char| !c.is_ascii_digit()).next().unwrap_or(""))
            .and_then(|m| m.parse::<u8>().ok());
        match (major, minor) {
            (Some(2), Some(m)) => return Some(format!("2.{m}")),
            (Some(2), None) => return Some("2".to_owned()),
            (Some(3), Some(m)) if m < 7 => return Some(format!("3.{m}")),
            _ => {}
        }
    }
    None
}

fn detect_version(f: &Found, mem: &TargetMemory) -> Option<(u8, u8, u8)> {
    if let Some((addr, _)) = f.elf.symbol("Py_Version") {
        if let Ok(hex) = mem.read_u64(f.bias.wrapping_add(addr)) {
            let hex = hex & 0xffff_ffff;
            let v = ((hex >> 24) as u8, (hex >> 16) as u8, (hex >> 8) as u8);
            if v.0 == 3 {
                return Some(v);
            }
        }
    }
    // 3.13+: the debug offsets block carries PY_VERSION_HEX too.
    if let Ok(bytes) = mem.read_vec(f.runtime, 24) {
        if let Some(d) = debug_offsets::parse(&bytes) {
            return Some((d.major(), d.minor(), d.micro()));
        }
    }
    let from_rodata = f.elf.scan_version();
    let name = f.path.rsplit('/').next().unwrap_or("");
    let minor_from_name = name
        .strip_prefix("libpython3.")
        .or_else(|| name.strip_prefix("python3."))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|m| m.parse::<u8>().ok());
    match (from_rodata, minor_from_name) {
        (Some(v), Some(m)) if v.1 == m => Some(v),
        (Some(v), None) => Some(v),
        // Micro version unknown: the layout depends on the minor version only (checked at attach).
        (_, Some(m)) => Some((3, m, MICRO_UNKNOWN)),
        (None, None) => None,
    }
}

pub fn attach(pid: i32) -> Result<Interpreter> {
    if pid <= 0 || !procfs::exists(pid) {
        return Err(Error::new(
            ErrorKind::NoSuchProcess,
            format!("no process with pid {pid}"),
        ));
    }
    let maps = read_maps(pid)?;
    let exe = procfs::exe(pid);
    if maps.is_empty() {
        return Err(if procfs::is_gone(pid) {
            Error::new(ErrorKind::NoSuchProcess, format!("pid {pid} has exited"))
        } else {
            Error::new(
                ErrorKind::NotPython,
                format!(
                    "pid {pid} is not a Python process (it has no memory maps: a kernel thread?)"
                ),
            )
        });
    }
    let file_for = |path: &str, start: u64| {
        deleted_file_path(pid, path, start, &maps).unwrap_or_else(|| readable_path(pid, path))
    };
    let Some(found) = find_runtime(pid, &maps, &exe, &file_for) else {
        if let Some(old) = older_python(&maps, &exe) {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "pid {pid} runs Python {old}, which gilty does not support (supported: {})",
                    supported_list()
                ),
            ));
        }
        return Err(Error::new(
            ErrorKind::NotPython,
            format!(
                "pid {pid} ({}) is not a Python process (no libpython or _PyRuntime found)",
                exe.as_deref().unwrap_or("?")
            ),
        ));
    };
    let mem = ProcessMemory::open(pid).map_err(|e| from_os(pid, &e, "memory"))?;
    // A first read tells permission problems apart from layout problems.
    mem.read_u64(found.runtime)
        .map_err(|e| from_os(pid, &e, "memory"))?;
    let mem = TargetMemory::Process(mem);
    attach_found(pid, &format!("pid {pid}"), found, mem, exe)
}

/// Attaches to the interpreter of the process a core file was taken from (`CoreFile`): the same
/// discovery as a live attach, on the core's maps and memory.
pub fn attach_core(core: std::sync::Arc<CoreFile>) -> Result<Interpreter> {
    let pid = core.pid;
    let who = format!("core {} (pid {pid})", core.path);
    let maps = core.maps();
    let exe = core.executable_path();
    let file_for = |path: &str, _start: u64| core.local_path(path);
    let Some(found) = find_runtime(pid, &maps, &exe, &file_for) else {
        let missing = core.missing_files();
        if let Some(first) = missing.first() {
            return Err(Error::new(
                ErrorKind::NotPython,
                format!(
                    "{who}: {first} (mapped by the process) cannot be read here{}: give the interpreter with --exe, or the files' root with --sysroot",
                    if missing.len() > 1 { format!(", nor {} other files", missing.len() - 1) } else { String::new() }
                ),
            ));
        }
        return Err(Error::new(
            ErrorKind::NotPython,
            format!(
                "{who} ({}) is not of a Python process (no libpython or _PyRuntime found)",
                exe.as_deref().unwrap_or("?")
            ),
        ));
    };
    let mem = TargetMemory::Core(core.clone());
    mem.read_u64(found.runtime).map_err(|e| {
        Error::new(
            ErrorKind::NotPython,
            format!("{who}: _PyRuntime cannot be read from the core ({e})"),
        )
    })?;
    attach_found(pid, &who, found, mem, exe)
}

/// A failed read of the target's memory: for a live process, what /proc says; for a core, the
/// reason.
fn read_error(pid: i32, who: &str, mem: &TargetMemory, e: &std::io::Error) -> Error {
    match mem {
        TargetMemory::Process(_) => from_os(pid, e, "memory"),
        TargetMemory::Core(_) => Error::new(ErrorKind::NotPython, format!("{who}: {e}")),
    }
}

/// The common part of a live and a core attach: version, layout, validation.
fn attach_found(
    pid: i32,
    who: &str,
    found: Found,
    mem: TargetMemory,
    exe: Option<String>,
) -> Result<Interpreter> {
    let version = detect_version(&found, &mem).ok_or_else(|| {
        Error::new(
            ErrorKind::UnrecognisedInterpreter,
            format!(
                "{who}: could not determine the Python version of {}",
                found.path
            ),
        )
    })?;
    let Some(base) = layout_for(version.0, version.1) else {
        return Err(Error::new(
            ErrorKind::UnsupportedVersion,
            format!(
                "{who} runs Python {}, which gilty does not support (supported: {})",
                version_string(version),
                supported_list()
            ),
        ));
    };
    let mut layout = *base;
    let mut mismatches = Vec::new();
    let mut used_debug_offsets = false;
    if version.1 >= 13 {
        // 3.14+: the block's members sit where the version's header puts them (generated with the
        // table).
        let named =
            gilty_layouts::debug_offsets_fields(version.0, version.1).filter(|_| version.1 >= 14);
        let size = named.map_or(debug_offsets::SIZE_3_13, |(_, size)| size as usize);
        let bytes = mem
            .read_vec(found.runtime, size)
            .map_err(|e| read_error(pid, who, &mem, &e))?;
        if let Some((_, true)) = debug_offsets::peek_version(&bytes) {
            // Py_GIL_DISABLED builds (python3.13t, 3.14t) lay their structs out otherwise and have
            // no GIL.
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!(
                    "{who} runs a free-threaded (Py_GIL_DISABLED) build of Python {} ({}), which gilty does not support: it has no GIL to diagnose",
                    version_string(version),
                    found.path
                ),
            ));
        }
        let parsed = match named {
            Some((fields, _)) => debug_offsets::parse_named(&bytes, version.1, fields)
                .map(|d| debug_offsets::apply_named(&layout, &d)),
            None => debug_offsets::parse(&bytes).map(|d| debug_offsets::apply(&layout, &d)),
        };
        match parsed {
            Some((l, m)) => {
                layout = l;
                mismatches = m;
                used_debug_offsets = true;
            }
            None => {
                return Err(Error::new(
                    ErrorKind::UnrecognisedInterpreter,
                    format!(
                        "{who}: Python {} without a valid _Py_DebugOffsets block",
                        version_string(version)
                    ),
                ))
            }
        }
    }
    if let Some(size) = found.runtime_size {
        if size != layout.runtime_size {
            return Err(Error::new(
                ErrorKind::UnrecognisedInterpreter,
                format!(
                    "{who}: _PyRuntime is {size} bytes but Python {} release builds have {} (a debug or custom build?)",
                    version_string(version),
                    layout.runtime_size
                ),
            ));
        }
    }

    let code_type = found
        .elf
        .symbol("PyCode_Type")
        .map(|(a, _)| found.bias.wrapping_add(a));
    let mut interp = Interpreter {
        pid,
        mem,
        layout,
        version,
        binary: found.path.clone(),
        executable: exe.unwrap_or_default(),
        runtime: found.runtime,
        code_type,
        gil: GilLocation::Fixed(0),
        debug_offset_mismatches: mismatches,
        used_debug_offsets,
    };
    interp.validate_and_locate()?;
    if interp.version.2 == MICRO_UNKNOWN {
        interp.version.2 = interp.micro_once_sys_exists().unwrap_or(MICRO_UNKNOWN);
    }
    Ok(interp)
}

impl Interpreter {
    pub fn version_string(&self) -> String {
        version_string(self.version)
    }

    fn read_ptr(&self, addr: u64, what: &str) -> Result<u64> {
        self.mem
            .read_u64(addr)
            .map_err(|e| from_os(self.pid, &e, what))
    }

    /// The main interpreter state (the last one in the `interpreters.head` list).
    pub fn main_interp(&self) -> Result<u64> {
        let main = self.read_ptr(
            self.runtime + self.layout.runtime_interpreters_main,
            "the interpreter list",
        )?;
        if main != 0 {
            return Ok(main);
        }
        self.read_ptr(
            self.runtime + self.layout.runtime_interpreters_head,
            "the interpreter list",
        )
    }

    /// Checks the layout against live data (back-pointers) and finds the GIL.
    fn validate_and_locate(&mut self) -> Result<()> {
        let pid = self.pid;
        let interp = self.main_interp()?;
        if interp == 0 {
            return Err(Error::new(
                ErrorKind::NotInitialised,
                format!("pid {pid} has not initialised its Python interpreter yet"),
            ));
        }
        let head = self.read_ptr(interp + self.layout.interp_threads_head, "the thread list")?;
        if head == 0 {
            return Err(Error::new(
                ErrorKind::NotInitialised,
                format!("pid {pid} has no Python thread state yet (starting up or shutting down)"),
            ));
        }
        let back = self.read_ptr(head + self.layout.tstate_interp, "a thread state")?;
        if back != interp {
            return Err(Error::new(
                ErrorKind::UnrecognisedInterpreter,
                format!(
                    "pid {pid}: Python {} thread state does not point back to its interpreter; the struct layout does not match this build",
                    self.version_string()
                ),
            ));
        }
        self.gil = match (self.layout.runtime_gil, self.layout.interp_gil_ptr) {
            (Some(off), _) => GilLocation::Fixed(self.runtime + off),
            (None, Some(off)) => {
                let p = self.read_ptr(interp + off, "the GIL pointer")?;
                if p == 0 {
                    return Err(Error::new(
                        ErrorKind::UnrecognisedInterpreter,
                        format!("pid {pid}: the interpreter has no GIL pointer"),
                    ));
                }
                GilLocation::Pointer { resolved: p }
            }
            (None, None) => {
                return Err(Error::new(
                    ErrorKind::Internal,
                    "layout names no GIL location",
                ))
            }
        };
        // The GIL interval is a switch interval in microseconds: a sane value confirms the GIL
        // address.
        let interval = self.read_ptr(self.gil.address() + self.layout.gil_interval, "the GIL")?;
        if interval == 0 || interval > 60_000_000 {
            return Err(Error::new(
                ErrorKind::UnrecognisedInterpreter,
                format!("pid {pid}: the GIL switch interval reads as {interval} us; the struct layout does not match this build"),
            ));
        }
        Ok(())
    }

    /// The micro version from the target's `sys.version` (for builds whose binary does not carry
    /// it: pyenv's 3.10). A process attached in its first milliseconds (`record -- CMD`) has thread
    /// states before its `sys` module, which it then makes within a millisecond or two: waited for,
    /// briefly, rather than reported as "3.10" (4 recordings in 117 did).
    fn micro_once_sys_exists(&self) -> Option<u8> {
        const TRIES: usize = 50;
        for attempt in 0..TRIES {
            if let Ok(Some(obj)) = self.module_global("sys", "version") {
                return self.micro_from_sys_version(obj);
            }
            // A core does not change: one read says it all.
            if attempt + 1 == TRIES || self.mem.core().is_some() || procfs::is_gone(self.pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        None
    }

    fn micro_from_sys_version(&self, obj: u64) -> Option<u8> {
        let text = crate::interp::pyobjects::read_unicode(&self.mem, &self.layout, obj).ok()?;
        let release = text.split_whitespace().next()?;
        let v = parse_release(release)?;
        (v.0 == self.version.0 && v.1 == self.version.1).then_some(v.2)
    }

    /// Looks up `module.name` through the main interpreter's `sys.modules`; None when the module is
    /// not imported or has no such global.
    pub fn module_global(&self, module: &str, name: &str) -> std::io::Result<Option<u64>> {
        let main = self
            .main_interp()
            .map_err(|e| std::io::Error::other(e.message))?;
        crate::interp::object_graph::module_global_in(
            &crate::interp::object_graph::Reader::new(&self.mem, &self.layout),
            main,
            module,
            name,
        )
    }

    /// The OS threads: a live process's from /proc, a core's from its NT_PRSTATUS notes.
    pub fn thread_ids(&self) -> std::io::Result<Vec<i32>> {
        match self.mem.core() {
            Some(core) => Ok(core.threads.iter().map(|t| t.tid).collect()),
            None => procfs::thread_ids(self.pid),
        }
    }

    /// `sys.getswitchinterval()` of the target, in seconds (read each time: the target may change
    /// it).
    pub fn switch_interval_s(&self) -> Result<f64> {
        let us = self.read_ptr(self.gil.address() + self.layout.gil_interval, "the GIL")?;
        Ok(us as f64 / 1e6)
    }

    /// Futex addresses inside the GIL struct: a thread blocked on one of them waits for the GIL.
    pub fn gil_futex_range(&self) -> (u64, u64) {
        let g = self.gil.address();
        (g + self.layout.gil_cond, g + self.layout.gil_size)
    }
}
