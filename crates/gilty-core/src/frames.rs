//! Walking a thread's Python frames and turning code objects into (function, file, line).
//!
//! `Frame.function` is the qualified name: `co_qualname` on 3.11+, and on 3.10 the class read from a
//! method's `self`/`cls` argument (`method_class.rs`).
//!
//! The target runs while we walk, so a walk can mix frames from different moments or wander into
//! freed frames. A walk is accepted only if it is consistent (see `walk`); otherwise it is torn.

use crate::linetable::{line_310, line_311};
use crate::method_class::{FirstArg, TypeNames};
use crate::process::block_cache::BlockCache;
use crate::process::memory::Memory;
use crate::pyobjects::{read_bytes, read_unicode};
use crate::threads::WalkHead;
use gilty_layouts::Layout;
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

/// How long a decoded code object is trusted without re-reading its header. A frame keeps its code
/// object alive, so an address can only change meaning if the object is freed and another allocated
/// there; re-checking every entry this often bounds how long such a reuse could be misreported, and
/// saves one read per frame per pass.
const RECHECK_CODE_AFTER: Duration = Duration::from_millis(200);

/// Deeper chains are taken as a cycle read from memory that changed under us.
pub const MAX_DEPTH: usize = 2048;
const MAX_LINETABLE: usize = 1 << 20;
/// Most of a data-stack chunk read in one go (the newest part; older frames are read as needed).
const MAX_CHUNK_READ: u64 = 256 << 10;
/// `_PyInterpreterFrame.owner` value of the shim frame a C caller pushes (3.12+, pycore_frame.h).
const FRAME_OWNED_BY_CSTACK: u8 = 3;
/// 3.10 `PyFrameObject.f_state` values (Include/cpython/frameobject.h).
const FRAME_CREATED: i8 = -2;
const FRAME_SUSPENDED: i8 = -1;
const FRAME_EXECUTING: i8 = 0;
const FRAME_UNWINDING: i8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub function: String,
    pub file: String,
    pub line: i32,
}

/// A stack (innermost first) and where its innermost frame stands: (code object, instruction).
pub type Walked = (Vec<Frame>, Option<(u64, i64)>);

#[derive(Debug)]
pub enum WalkError {
    /// Memory changed while we read it (a freed frame, a cycle, a non-code object): retry or drop.
    Torn,
    Io(io::Error),
}

impl From<io::Error> for WalkError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::EFAULT) | Some(libc::EIO) => WalkError::Torn,
            _ if e.kind() == io::ErrorKind::InvalidData || e.kind() == io::ErrorKind::UnexpectedEof => WalkError::Torn,
            _ => WalkError::Io(e),
        }
    }
}

struct CodeInfo {
    /// Pointers that identify the code object's contents; a reused address with other contents misses.
    key: (u64, u64, u64),
    /// When the key was last compared with the object in memory.
    checked: Instant,
    /// `co_qualname` (3.11+) or `co_name` (3.10).
    function: String,
    /// 3.10: whether the class comes from the first argument.
    first_arg: FirstArg,
    file: String,
    firstlineno: i32,
    linetable: Vec<u8>,
}

/// Decoded code objects by address, checked against their name/file/table pointers on every use;
/// and (3.10) class names of methods' first arguments.
#[derive(Default)]
pub struct CodeCache {
    map: HashMap<u64, CodeInfo>,
    types: TypeNames,
}

impl CodeCache {
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

fn u64_at(b: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
}
fn i32_at(b: &[u8], off: u64) -> i32 {
    i32::from_le_bytes(b[off as usize..off as usize + 4].try_into().unwrap())
}

pub struct FrameWalker<'a> {
    pub mem: &'a dyn Memory,
    pub layout: &'a Layout,
    pub code_type: Option<u64>,
    frame_read_len: usize,
    code_read_len: usize,
}

impl<'a> FrameWalker<'a> {
    pub fn new(mem: &'a dyn Memory, layout: &'a Layout, code_type: Option<u64>) -> Self {
        let l = layout;
        // 3.10 reads the first local with the frame, for the method's class (no co_qualname).
        let first_local = if l.code_qualname.is_none() { l.frame_localsplus } else { None };
        let frame_read_len = [
            Some(l.frame_code),
            Some(l.frame_previous),
            Some(l.frame_instr),
            l.frame_owner,
            l.frame_state,
            l.frame_is_entry,
            first_local,
        ]
        .iter()
            .flatten()
            .max()
            .copied()
            .unwrap()
            + 8;
        let code_read_len = [
            Some(l.code_filename),
            Some(l.code_name),
            l.code_qualname,
            l.code_varnames,
            Some(l.code_argcount),
            Some(l.code_firstlineno),
            Some(l.code_linetable),
            l.code_code,
            Some(l.object_type),
        ]
        .iter()
        .flatten()
        .max()
        .copied()
        .unwrap()
            + 8;
        FrameWalker { mem, layout, code_type, frame_read_len: frame_read_len as usize, code_read_len: code_read_len as usize }
    }

    /// Address of the innermost frame of a thread state (already read into `tstate_bytes` when possible).
    pub fn top_frame(&self, tstate: u64) -> Result<u64, WalkError> {
        let l = self.layout;
        if let Some(off) = l.tstate_frame {
            return Ok(self.mem.read_u64(tstate + off)?);
        }
        if let Some(off) = l.tstate_current_frame {
            return Ok(self.mem.read_u64(tstate + off)?);
        }
        let cframe = self.mem.read_u64(tstate + l.tstate_cframe.unwrap())?;
        if cframe == 0 {
            return Ok(0);
        }
        Ok(self.mem.read_u64(cframe + l.cframe_current_frame.unwrap())?)
    }

    /// The thread's current frame as the walk's first read sees it, with the used part of its
    /// data-stack chunk (3.11+) loaded into `reads` in one read: the frames a walk visits are then
    /// copied out of one snapshot instead of read one by one. The current-frame pointer and the
    /// chunk bounds come from one read of the thread state, so they belong together.
    /// `head`, when given, is those three fields as read earlier in the pass (with the thread list):
    /// a stack that moved since fails the recheck at the end of the walk like any other.
    fn start_walk(&self, tstate: u64, head: Option<WalkHead>, reads: &BlockCache) -> Result<u64, WalkError> {
        let l = self.layout;
        let (Some(chunk_off), Some(top_off)) = (l.tstate_datastack_chunk, l.tstate_datastack_top) else {
            return self.top_frame(tstate);
        };
        let frame_off = l.tstate_current_frame.or(l.tstate_cframe).ok_or(WalkError::Torn)?;
        let WalkHead { frame_ptr: ptr, chunk, top } = match head {
            Some(h) => h,
            None => {
                let lo = frame_off.min(chunk_off).min(top_off);
                let hi = frame_off.max(chunk_off).max(top_off) + 8;
                let mut buf = vec![0u8; (hi - lo) as usize];
                self.mem.read(tstate + lo, &mut buf)?;
                WalkHead { frame_ptr: u64_at(&buf, frame_off - lo), chunk: u64_at(&buf, chunk_off - lo), top: u64_at(&buf, top_off - lo) }
            }
        };
        let first = match (l.tstate_cframe, l.cframe_current_frame) {
            (Some(_), Some(cf_off)) if ptr != 0 => reads.read_u64(ptr + cf_off)?,
            (Some(_), _) => 0,
            _ => ptr,
        };
        if chunk != 0 && top > chunk {
            // A very deep stack: the newest frames are the ones every walk visits.
            let from = chunk.max(top.saturating_sub(MAX_CHUNK_READ));
            // Failing here only costs the shortcut: the walk reads frame by frame.
            let _ = reads.load(from, (top - from) as usize);
        }
        Ok(first)
    }

    /// The thread's stack, innermost first, and where the innermost frame stands (code, instruction).
    ///
    /// Frames are read through a per-walk `BlockCache` (3.11+: the data-stack chunk in one read;
    /// frames elsewhere, such as generators' and 3.10's heap frames, a page at a time).
    ///
    /// Consistency rules, any failure being `Torn`:
    /// - the thread's current frame, read again from the target after the walk, is the one the walk
    ///   started from (the stack did not move under us; a stack that moved and came back to the
    ///   same address is not caught by this);
    /// - 3.10: every frame is live (`f_state` executing or unwinding; the innermost may also be just
    ///   created or resuming). Freed frames keep their `f_code` and link through `f_back` into the
    ///   free list, which ends in NULL: without this a walk reaching a freed frame ends early or
    ///   runs on through unrelated frames;
    /// - 3.11: the outermost frame is an entry frame (`is_entry`: entered from C, as a thread's
    ///   first frame always is); 3.12+: it is the shim frame the first C caller pushed (owner
    ///   `FRAME_OWNED_BY_CSTACK`). A chain ending anywhere else ran into stale memory.
    pub fn walk(&self, tstate: u64, cache: &mut CodeCache) -> Result<Walked, WalkError> {
        self.walk_from(tstate, None, true, cache)
    }

    /// `walk`, starting from a thread-state head read earlier (see `start_walk`). `moving`: the thread
    /// may run Python code during the walk (it holds the GIL, or that is unknown); only then does 3.10
    /// read each frame's link again after the walk.
    pub fn walk_from(&self, tstate: u64, head: Option<WalkHead>, moving: bool, cache: &mut CodeCache) -> Result<Walked, WalkError> {
        // Read the whole chain first and check it before decoding anything: the window in which the
        // thread can move its stack under us is then only as long as the reads themselves.
        let chain = self.read_chain(tstate, head, moving)?;
        let mut out = Vec::with_capacity(chain.len());
        let mut top = None;
        // Code objects, their names and line tables tend to share pages (unmarshalled together).
        let code_reads = BlockCache::new(self.mem);
        for &(code, instr, first_local) in &chain {
            if let Some(f) = self.frame_at(code, instr, first_local, cache, &code_reads)? {
                if top.is_none() {
                    top = Some((code, instr));
                }
                out.push(f);
            }
        }
        Ok((out, top))
    }

    /// (code, instruction, first local) of every frame with code, innermost first, checked as
    /// `walk` describes.
    fn read_chain(&self, tstate: u64, head: Option<WalkHead>, moving: bool) -> Result<Vec<(u64, i64, u64)>, WalkError> {
        let l = self.layout;
        let mut out = Vec::new();
        let reads = BlockCache::new(self.mem);
        let first = self.start_walk(tstate, head, &reads)?;
        let mut frame = first;
        let mut buf = vec![0u8; self.frame_read_len];
        let mut depth = 0;
        // 3.10: (frame, previous, state) of every frame, to be read again once the walk is done.
        let mut links: Vec<(u64, u64, i8)> = Vec::new();
        while frame != 0 {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(WalkError::Torn);
            }
            reads.read(frame, &mut buf)?;
            let code = u64_at(&buf, l.frame_code);
            let previous = u64_at(&buf, l.frame_previous);
            if let Some(off) = l.frame_state {
                let state = buf[off as usize] as i8;
                links.push((frame, previous, state));
                let live = matches!(state, FRAME_EXECUTING | FRAME_UNWINDING)
                    || (frame == first && matches!(state, FRAME_CREATED | FRAME_SUSPENDED));
                // A frame that is only being set up with nothing before it is a spare frame caught
                // mid-reuse (3.10 keeps freed frames and relinks them), not a thread's first frame
                // being entered: dropping that rare real case costs one sample.
                if !live || (previous == 0 && matches!(state, FRAME_CREATED | FRAME_SUSPENDED)) {
                    return Err(WalkError::Torn);
                }
            }
            let owner = l.frame_owner.map(|off| buf[off as usize]);
            if previous == 0 && !self.is_thread_bottom(&buf, owner) {
                return Err(WalkError::Torn);
            }
            let skip = l.version.1 >= 12 && owner == Some(FRAME_OWNED_BY_CSTACK);
            if !skip && code != 0 {
                let instr: i64 = if l.version.1 == 10 { i32_at(&buf, l.frame_instr) as i64 } else { u64_at(&buf, l.frame_instr) as i64 };
                let first_local = match (l.code_qualname, l.frame_localsplus) {
                    (None, Some(off)) => u64_at(&buf, off),
                    _ => 0,
                };
                out.push((code, instr, first_local));
            }
            if previous == frame {
                return Err(WalkError::Torn);
            }
            frame = previous;
        }
        // A fresh read, not the cached one: did the stack move while we read it?
        if first != 0 {
            let (top, recursion_depth) = self.top_frame_and_depth(tstate)?;
            if top != first {
                return Err(WalkError::Torn);
            }
            // 3.10: a stack that moved and came back to the same frame can leave a chain of frames
            // each live when read but never all at once, deeper than the thread is. Every frame's
            // evaluation counts in the recursion counter, so a real chain is never longer.
            if recursion_depth.is_some_and(|d| depth as i64 > d) {
                return Err(WalkError::Torn);
            }
        }
        // 3.10: frame objects are heap blocks read a page at a time, so the chain can join pages read
        // at different moments of a stack that moved and came back. Each frame's link and state read
        // again now must be what the walk saw.
        if moving && !links.is_empty() {
            let again = BlockCache::new(self.mem);
            let state_off = l.frame_state.unwrap_or_default() as usize;
            for &(frame, previous, state) in &links {
                again.read(frame, &mut buf)?;
                if u64_at(&buf, l.frame_previous) != previous || buf[state_off] as i8 != state {
                    return Err(WalkError::Torn);
                }
            }
        }
        Ok(out)
    }

    /// The thread's current frame and, where the layout has it (3.10), its recursion counter, from
    /// one read of the thread state.
    fn top_frame_and_depth(&self, tstate: u64) -> Result<(u64, Option<i64>), WalkError> {
        let l = self.layout;
        let (Some(frame_off), Some(depth_off)) = (l.tstate_frame, l.tstate_recursion_depth) else {
            return Ok((self.top_frame(tstate)?, None));
        };
        let lo = frame_off.min(depth_off);
        let mut head = vec![0u8; (frame_off.max(depth_off) + 8 - lo) as usize];
        self.mem.read(tstate + lo, &mut head)?;
        Ok((u64_at(&head, frame_off - lo), Some(i32_at(&head, depth_off - lo) as i64)))
    }

    /// Whether a frame with no previous frame is where a thread's stack starts.
    fn is_thread_bottom(&self, buf: &[u8], owner: Option<u8>) -> bool {
        let l = self.layout;
        if let Some(off) = l.frame_is_entry {
            return buf[off as usize] == 1;
        }
        if l.version.1 >= 12 {
            return owner == Some(FRAME_OWNED_BY_CSTACK);
        }
        true // 3.10: liveness of every frame is checked instead
    }

    /// 3.10: C calls in progress on the thread's stack, as far as the recursion counter tells: its
    /// `recursion_depth` less its number of frames (each frame's evaluation adds one, and so does
    /// every C function called through the call protocol, which on 3.10 is every call a bytecode
    /// makes). 0 means the thread is in the eval loop of its innermost frame and in no C function, so
    /// a thread without the GIL there is in the eval breaker's GIL handoff. None on other versions.
    pub fn calls_in_progress(&self, tstate: u64) -> Result<Option<i64>, WalkError> {
        let l = self.layout;
        let (mut frame, Some(depth)) = self.top_frame_and_depth(tstate)? else {
            return Ok(None);
        };
        let reads = BlockCache::new(self.mem);
        let mut frames = 0i64;
        while frame != 0 {
            frames += 1;
            if frames as usize > MAX_DEPTH {
                return Err(WalkError::Torn);
            }
            let previous = reads.read_u64(frame + l.frame_previous)?;
            if previous == frame {
                return Err(WalkError::Torn);
            }
            frame = previous;
        }
        Ok(Some(depth - frames))
    }

    /// Where the innermost Python frame stands (code, instruction), without decoding anything: the
    /// one fact classification needs when the stack itself is not wanted (the in-process monitor).
    pub fn top_position(&self, tstate: u64) -> Result<Option<(u64, i64)>, WalkError> {
        let l = self.layout;
        let mut frame = self.top_frame(tstate)?;
        let mut buf = vec![0u8; self.frame_read_len];
        for _ in 0..MAX_DEPTH {
            if frame == 0 {
                return Ok(None);
            }
            self.mem.read(frame, &mut buf)?;
            let code = u64_at(&buf, l.frame_code);
            let shim = match l.frame_owner {
                Some(off) => l.version.1 >= 12 && buf[off as usize] == FRAME_OWNED_BY_CSTACK,
                None => false,
            };
            if !shim && code != 0 {
                let instr: i64 = if l.version.1 == 10 { i32_at(&buf, l.frame_instr) as i64 } else { u64_at(&buf, l.frame_instr) as i64 };
                return Ok(Some((code, instr)));
            }
            frame = u64_at(&buf, l.frame_previous);
        }
        Err(WalkError::Torn)
    }

    /// The opcode a frame stands on (3.10: `f_lasti` indexes `co_code`; 3.11+: a pointer into
    /// `co_code_adaptive`, whose low byte is the possibly specialised opcode).
    pub fn opcode_at(&self, code: u64, instr: i64) -> Option<u8> {
        let l = self.layout;
        if l.version.1 == 10 {
            let bytes = self.mem.read_u64(code + l.code_code?).ok()?;
            let size = self.mem.read_i64(bytes + l.varobject_size).ok()?;
            let off = instr.checked_mul(2)?;
            if off < 0 || off >= size {
                return None;
            }
            return self.mem.read_u8(bytes + l.bytes_sval + off as u64).ok();
        }
        if instr <= 0 {
            return None;
        }
        self.mem.read_u8(instr as u64).ok()
    }

    /// One frame decoded from its code object and instruction as read elsewhere (a suspended
    /// coroutine's frame, which is on no thread's stack), reading through `mem`.
    pub fn decode_frame(&self, code: u64, instr: i64, cache: &mut CodeCache, mem: &dyn Memory) -> Result<Option<Frame>, WalkError> {
        self.frame_at(code, instr, 0, cache, mem)
    }

    /// Decodes one frame; `Ok(None)` for a 3.13 frame whose executable is not a code object.
    /// `first_local` is the frame's first local variable (3.10 only, else 0).
    fn frame_at(&self, code: u64, instr: i64, first_local: u64, cache: &mut CodeCache, mem: &dyn Memory) -> Result<Option<Frame>, WalkError> {
        let l = self.layout;
        let fresh = cache.map.get(&code).map(|info| info.checked.elapsed() < RECHECK_CODE_AFTER).unwrap_or(false);
        if !fresh && !self.refresh_code(code, cache, mem)? {
            return Ok(None);
        }
        let info = cache.map.get(&code).unwrap();
        let mut frame = self.located(info, code, instr).ok_or(WalkError::Torn)?;
        if let Some(class) = cache.types.class_of(self.mem, l, info.first_arg, first_local) {
            frame.function = format!("{class}.{}", frame.function);
        }
        Ok(Some(frame))
    }

    /// Makes sure `cache` holds the code object at `code`, as it is now; false for a 3.13
    /// executable that is not a code object.
    fn refresh_code(&self, code: u64, cache: &mut CodeCache, mem: &dyn Memory) -> Result<bool, WalkError> {
        let l = self.layout;
        let mut head = vec![0u8; self.code_read_len];
        mem.read(code, &mut head)?;
        if let Some(ct) = self.code_type {
            if u64_at(&head, l.object_type) != ct {
                if l.version.1 >= 13 {
                    return Ok(false); // f_executable may legitimately be another object (e.g. None)
                }
                return Err(WalkError::Torn);
            }
        }
        let name_ptr = u64_at(&head, l.code_qualname.unwrap_or(l.code_name));
        let key = (u64_at(&head, l.code_filename), name_ptr, u64_at(&head, l.code_linetable));
        match cache.map.get_mut(&code) {
            Some(c) if c.key == key => c.checked = Instant::now(),
            _ => {
                let function = read_unicode(mem, l, key.1)?;
                let file = read_unicode(mem, l, key.0)?;
                let linetable = read_bytes(mem, l, key.2, MAX_LINETABLE)?;
                let firstlineno = i32_at(&head, l.code_firstlineno);
                let first_arg = match l.code_varnames {
                    Some(off) => self.first_arg(u64_at(&head, off), i32_at(&head, l.code_argcount)),
                    None => FirstArg::Plain,
                };
                cache.map.insert(code, CodeInfo { key, checked: Instant::now(), function, first_arg, file, firstlineno, linetable });
            }
        }
        Ok(true)
    }

    /// 3.10: what the first parameter (`co_varnames[0]`) says about the code's class; read once per
    /// code object. A failed read only loses the class.
    fn first_arg(&self, varnames: u64, argcount: i32) -> FirstArg {
        if argcount <= 0 || varnames == 0 {
            return FirstArg::Plain;
        }
        let l = self.layout;
        let name = self.mem.read_u64(varnames + l.tuple_item).ok().and_then(|p| read_unicode(self.mem, l, p).ok());
        name.map(|n| FirstArg::of(argcount, &n)).unwrap_or(FirstArg::Plain)
    }

    /// The frame for a decoded code object at an instruction position; None when the position is
    /// outside the code (the frame or code changed while we read them).
    fn located(&self, info: &CodeInfo, code: u64, instr: i64) -> Option<Frame> {
        let l = self.layout;
        let line = if l.version.1 == 10 {
            line_310(&info.linetable, info.firstlineno, instr.max(0) * 2)
        } else {
            let first = code as i64 + l.code_code_adaptive.unwrap() as i64;
            let index = (instr - first) / 2;
            if index < 0 {
                info.firstlineno // frame created, no instruction run yet
            } else {
                line_311(&info.linetable, info.firstlineno, index)?
            }
        };
        Some(Frame { function: info.function.clone(), file: info.file.clone(), line })
    }
}
