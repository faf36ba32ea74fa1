//! Unwinding one thread's user stack, copied at one moment, into return addresses (framehop, from
//! `.eh_frame` / `.debug_frame` CFI, frame pointers where a module has none), and naming them.
//!
//! The modules are the target's file-backed executable mappings from `/proc/PID/maps`, read again
//! when an address falls in no known module (a library loaded since) and dropped when a mapping is
//! gone (a library unloaded). An address in no module (an anonymous executable mapping, a library
//! unloaded before we looked) is `[unknown]`.

use super::module::{ModuleFile, Slice};
use crate::process::maps::{read_maps, MapEntry};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{FrameAddress, Unwinder};
use std::collections::HashMap;
use std::sync::Arc;

/// Deepest native stack followed.
const MAX_FRAMES: usize = 512;

/// User registers at the sample: the three framehop needs on x86-64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// Outermost functions of a thread's C stack.
const THREAD_STARTS: [&str; 5] = ["__clone3", "__clone", "clone3", "clone", "_start"];

/// Whether an unwind reached the thread's first frame: framehop ends there with an error (clone's
/// child has no caller), yet the stack is whole.
pub fn reached_thread_start(frames: &[NativeFrame]) -> bool {
    frames
        .last()
        .and_then(|f| f.function.as_deref())
        .is_some_and(|f| THREAD_STARTS.contains(&f))
}

/// A native frame, named as far as the file's symbols allow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NativeFrame {
    /// The function, or None (a stripped file's local function, or no module).
    pub function: Option<String>,
    /// The file's path, or None for an address in no file.
    pub library: Option<String>,
    /// Offset of the address from the file's load address (its address as linked), or the address
    /// itself when in no file.
    pub offset: u64,
    /// The source file and line of the address, where the file has DWARF line tables (`lines`).
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl NativeFrame {
    pub fn library_name(&self) -> Option<&str> {
        self.library
            .as_deref()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
    }
    /// `function`, or `lib+0xOFFSET`, or `[unknown]`.
    pub fn label(&self) -> String {
        match (&self.function, self.library_name()) {
            (Some(f), _) => f.clone(),
            (None, Some(lib)) => format!("{lib}+{:#x}", self.offset),
            (None, None) => "[unknown]".to_owned(),
        }
    }
}

/// The source file and line of `svma` in the module of `l`, if its DWARF says.
fn source(l: &Loaded, svma: u64) -> (Option<String>, Option<u32>) {
    match l.file.line_of(svma) {
        Some((file, line)) => (Some(file), Some(line)),
        None => (None, None),
    }
}

struct Loaded {
    start: u64,
    end: u64,
    bias: u64,
    file: Arc<ModuleFile>,
}

/// The unwinder of one target process, with its modules.
pub struct ProcessUnwinder {
    pid: i32,
    unwinder: UnwinderX86_64<Slice>,
    cache: CacheX86_64,
    /// Executable mappings, sorted by start.
    loaded: Vec<Loaded>,
    /// Files by path, kept across refreshes (a library mapped again is not parsed again).
    files: HashMap<String, Option<Arc<ModuleFile>>>,
    debug_roots: Vec<String>,
    /// Refreshes of the module list so far.
    pub refreshes: u64,
    /// Over a core file: its modules are all there is (no /proc to read again).
    core: bool,
}

fn root_of(pid: i32) -> String {
    // Our own root when the target shares it; its /proc root otherwise (containers). Both roots
    // read "/" for a target in a mount namespace of its own, which may mount other files at the
    // same paths.
    let link = |p: String| std::fs::read_link(p).ok();
    let same_root = link("/proc/self/root".into()) == link(format!("/proc/{pid}/root"));
    let same_mounts = link("/proc/self/ns/mnt".into()) == link(format!("/proc/{pid}/ns/mnt"));
    if same_root && same_mounts {
        String::new()
    } else {
        format!("/proc/{pid}/root")
    }
}

impl ProcessUnwinder {
    pub fn new(pid: i32) -> crate::Result<ProcessUnwinder> {
        let root = root_of(pid);
        let debug_roots = if root.is_empty() {
            vec![String::new()]
        } else {
            vec![root, String::new()]
        };
        let mut u = ProcessUnwinder {
            pid,
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            loaded: Vec::new(),
            files: HashMap::new(),
            debug_roots,
            refreshes: 0,
            core: false,
        };
        u.refresh()?;
        Ok(u)
    }

    /// An unwinder over a core file's executable file mappings (`CoreFile::maps`), the files read
    /// where the core reader finds them (under its sysroot, `--exe`). A core does not change: no
    /// refresh.
    pub fn for_core(core: &crate::process::core_file::CoreFile) -> ProcessUnwinder {
        let mut u = ProcessUnwinder {
            pid: 0,
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            loaded: Vec::new(),
            files: HashMap::new(),
            debug_roots: vec![String::new()],
            refreshes: 0,
            core: true,
        };
        let maps = core.maps();
        u.add_maps(&maps, &|path: &str, _m: &MapEntry| core.local_path(path));
        u
    }

    /// Reads `/proc/PID/maps` again: adds new executable file mappings, drops those gone.
    pub fn refresh(&mut self) -> crate::Result<()> {
        if self.core {
            return Ok(());
        }
        let maps = read_maps(self.pid)?;
        let pid = self.pid;
        let pid_root = self.debug_roots[0].clone();
        self.add_maps(&maps, &|path: &str, m: &MapEntry| {
            // A file deleted or replaced since it was mapped (an interpreter upgraded or a venv
            // removed under a running process) is read through the mapping itself.
            if path.ends_with(" (deleted)") {
                format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end)
            } else {
                format!("{pid_root}{path}")
            }
        });
        Ok(())
    }

    /// Adds the executable file mappings of `maps` not known yet and drops those no longer there;
    /// `open_path` says where to read a mapped file.
    fn add_maps(&mut self, maps: &[MapEntry], open_path: &dyn Fn(&str, &MapEntry) -> String) {
        self.refreshes += 1;
        let wanted: Vec<&MapEntry> = maps
            .iter()
            .filter(|m| m.perms.as_bytes().get(2) == Some(&b'x'))
            .filter(|m| m.path.as_deref().is_some_and(|p| p.starts_with('/')))
            .collect();
        // Gone, or now something else at that address.
        let keep: Vec<bool> = self
            .loaded
            .iter()
            .map(|l| {
                wanted.iter().any(|m| {
                    m.start == l.start
                        && m.end == l.end
                        && m.path.as_deref() == Some(l.file.path.as_str())
                })
            })
            .collect();
        let mut i = 0;
        self.loaded.retain(|l| {
            let k = keep[i];
            i += 1;
            if !k {
                self.unwinder.remove_module(l.start);
            }
            k
        });
        for m in wanted {
            if self.loaded.iter().any(|l| l.start == m.start) {
                continue;
            }
            let path = m.path.clone().unwrap();
            let roots = &self.debug_roots;
            let open_path = open_path(&path, m);
            let file = self
                .files
                .entry(path.clone())
                .or_insert_with(|| {
                    ModuleFile::load(&open_path, &path, roots)
                        .ok()
                        .map(Arc::new)
                })
                .clone();
            let Some(file) = file else { continue };
            let Some(bias) = file.bias(m.start, m.offset) else {
                continue;
            };
            self.unwinder
                .add_module(file.framehop_module(m.start..m.end, bias));
            self.loaded.push(Loaded {
                start: m.start,
                end: m.end,
                bias,
                file,
            });
        }
        self.loaded.sort_by_key(|l| l.start);
    }

    fn module_at(&self, addr: u64) -> Option<&Loaded> {
        let i = self.loaded.partition_point(|l| l.start <= addr);
        self.loaded.get(i.checked_sub(1)?).filter(|l| addr < l.end)
    }

    /// Whether every address is in a known module; if not, the module list is read again once.
    pub fn ensure_known(&mut self, addrs: &[u64]) {
        if addrs.iter().any(|&a| self.module_at(a).is_none()) {
            let _ = self.refresh();
        }
    }

    /// The return addresses of a stack copied at `stack_base` (innermost first, the first being the
    /// instruction pointer), and whether the walk reached the stack's end (false: it stopped at a
    /// frame it could not unwind, or at `MAX_FRAMES`).
    pub fn unwind(
        &mut self,
        regs: Regs,
        stack_base: u64,
        stack: &[u8],
    ) -> (Vec<FrameAddress>, bool) {
        if self.module_at(regs.ip).is_none() {
            self.ensure_known(&[regs.ip]);
        }
        let regs = if regs.bp == 0 {
            Regs {
                bp: self.frame_pointer_guess(stack_base, stack),
                ..regs
            }
        } else {
            regs
        };
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(stack_base).ok_or(())? as usize;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().unwrap()))
        };
        let mut out = Vec::new();
        let mut iter = self.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read,
        );
        loop {
            match iter.next() {
                Ok(Some(f)) => {
                    out.push(f);
                    if out.len() >= MAX_FRAMES {
                        return (out, false);
                    }
                }
                Ok(None) => return (out, true),
                Err(_) => return (out, false),
            }
        }
    }

    /// The frame pointer of a thread whose registers are not all known (blocked: `/proc` gives only
    /// sp and ip), or 0. A build with frame pointers (3.15, PEP 831) has CFI that finds each frame
    /// from rbp (CFA = rbp + 16), so without it the walk stops at the first interpreter frame above
    /// the C library. The guess is the lowest stack slot that starts a frame-pointer chain two
    /// links long: [A] a higher slot of the copy, [A + 8] and [[A] + 8] addresses in mapped code. A
    /// C library frame that saved rbp restores the true one from its CFI over the guess.
    fn frame_pointer_guess(&self, stack_base: u64, stack: &[u8]) -> u64 {
        let word = |off: usize| {
            stack
                .get(off..off + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        };
        let is_code = |addr: u64| addr > 0 && self.module_at(addr - 1).is_some();
        let end = stack_base + stack.len() as u64;
        let links = |a: u64| -> Option<u64> {
            let off = a.checked_sub(stack_base)? as usize;
            let (saved, ret) = (word(off)?, word(off + 8)?);
            (saved > a && saved + 16 <= end && saved % 8 == 0 && is_code(ret)).then_some(saved)
        };
        (0..stack.len().saturating_sub(16))
            .step_by(8)
            .map(|off| stack_base + off as u64)
            .find(|&a| links(a).and_then(links).is_some())
            .unwrap_or(0)
    }

    /// Names a frame: the function holding its address (a return address looks up the call
    /// instruction before it).
    pub fn symbolize(&self, frame: FrameAddress) -> NativeFrame {
        let addr = frame.address_for_lookup();
        let Some(l) = self.module_at(addr) else {
            return NativeFrame {
                offset: frame.address(),
                ..Default::default()
            };
        };
        let svma = addr.wrapping_sub(l.bias);
        let function = l.file.symbols.lookup(svma).map(|(name, _)| name.to_owned());
        let (file, line) = source(l, svma);
        NativeFrame {
            function,
            library: Some(l.file.path.clone()),
            offset: frame.address().wrapping_sub(l.bias),
            file,
            line,
        }
    }

    /// `symbolize`, with a named frame's offset at its function's start (one frame per function and
    /// source line when stacks are counted, whatever instruction it stood on).
    pub fn symbolize_function(&self, frame: FrameAddress) -> NativeFrame {
        let addr = frame.address_for_lookup();
        let Some(l) = self.module_at(addr) else {
            return NativeFrame {
                offset: frame.address(),
                ..Default::default()
            };
        };
        let svma = addr.wrapping_sub(l.bias);
        let (file, line) = source(l, svma);
        match l.file.symbols.lookup(svma) {
            Some((name, within)) => NativeFrame {
                function: Some(name.to_owned()),
                library: Some(l.file.path.clone()),
                offset: svma - within,
                file,
                line,
            },
            None => NativeFrame {
                function: None,
                library: Some(l.file.path.clone()),
                offset: frame.address().wrapping_sub(l.bias),
                file,
                line,
            },
        }
    }

    pub fn module_count(&self) -> usize {
        self.loaded.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn copy_own_stack(depth: u32, out: &mut Option<(Regs, u64, Vec<u8>)>) -> u32 {
        if depth > 0 {
            return copy_own_stack(depth - 1, out) + 1;
        }
        // Registers of this frame and the stack above it, as a sample would give them.
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers and a label's address; writes nothing else.
        unsafe {
            std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp", ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
        }
        // As the kernel would: as much as can be read above sp (the stack's top may be near).
        let mut len = 64 * 1024;
        let mut copy = vec![0u8; len];
        while len > 64 {
            let local = libc::iovec {
                iov_base: copy.as_mut_ptr() as *mut libc::c_void,
                iov_len: len,
            };
            let remote = libc::iovec {
                iov_base: sp as *mut libc::c_void,
                iov_len: len,
            };
            // SAFETY: reads our own memory into `copy` through the kernel, which checks the range.
            let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
            if n == len as isize {
                break;
            }
            len /= 2;
        }
        copy.truncate(len);
        *out = Some((Regs { ip, sp, bp }, sp, copy));
        0
    }

    #[test]
    fn unwinds_and_names_own_stack() {
        // A thread with a big stack, so the 64 KiB copy never runs past its top.
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(|| {
                let mut got = None;
                std::hint::black_box(copy_own_stack(3, &mut got));
                let (regs, base, stack) = got.unwrap();
                let mut u = ProcessUnwinder::new(std::process::id() as i32).unwrap();
                assert!(u.module_count() > 0);
                let (frames, complete) = u.unwind(regs, base, &stack);
                let names: Vec<String> = frames.iter().map(|f| u.symbolize(*f).label()).collect();
                // The compiler may fold the recursion and inline the closure; the ends must be
                // there.
                assert!(names[0].contains("copy_own_stack"), "{names:?}");
                assert!(names.iter().any(|n| n == "start_thread"), "{names:?}");
                assert!(complete && names.len() >= 4, "{names:?}");
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn frame_pointer_guess_starts_a_two_link_chain() {
        // A blocked 3.15 thread's stack: C library words, then frames chained by saved rbp, each
        // with a return address into mapped code (here, this test binary's own text).
        let u = ProcessUnwinder::new(std::process::id() as i32).unwrap();
        let code = frame_pointer_guess_starts_a_two_link_chain as *const () as usize as u64 + 4;
        let base = 0x7ff0_0000_0000u64;
        let mut words = vec![0u64; 64];
        words[1] = code; // a return address with no saved rbp under it: not a frame record
        words[2] = base + 3; // a stack address, but unaligned
        words[6] = base + 20 * 8; // frame record at slot 6 -> slot 20 -> slot 40
        words[7] = code;
        words[20] = base + 40 * 8;
        words[21] = code;
        words[40] = 0;
        words[41] = code;
        let stack: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(u.frame_pointer_guess(base, &stack), base + 6 * 8);
        // One link only (the chain's next record is not a frame): no guess.
        let mut one = words.clone();
        one[21] = 0;
        let stack: Vec<u8> = one.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(u.frame_pointer_guess(base, &stack), 0);
    }

    #[test]
    fn address_in_no_module_is_unknown() {
        let u = ProcessUnwinder::new(std::process::id() as i32).unwrap();
        let f = u.symbolize(FrameAddress::from_instruction_pointer(0x10));
        assert_eq!(f.label(), "[unknown]");
        assert_eq!(f.library, None);
    }
}
