//! Walking a thread's Python frames and turning code objects into (function, file, line).
//!
//! `Frame.function` is the qualified name: `co_qualname` on 3.11+, and on 3.10 the class read from
//! a method's `self`/`cls` argument (`method_class.rs`).
//!
//! The target runs while we walk, so a walk can mix frames from different moments or wander into
//! freed frames. A walk is accepted only if it is consistent (see `walk`); otherwise it is torn.

use crate::interp::linetable::{line_310, line_311, position_311, Position};
use crate::interp::method_class::{FirstArg, TypeNames};
use crate::interp::pyobjects::{read_bytes, read_unicode};
use crate::interp::threads::WalkHead;
use crate::process::block_cache::BlockCache;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::collections::HashMap;
use std::io;

/// Frames read per walk: a deeper stack (`sys.setrecursionlimit` raised past it) keeps its
/// innermost `MAX_DEPTH` frames under `CUT_FRAMES`. A walk of this many 3.11+ frames reads ~8 MB
/// and takes a few ms; a chain that repeats a frame is a cycle read from memory that changed under
/// us.
pub const MAX_DEPTH: usize = 100_000;
const MAX_LINETABLE: usize = 1 << 20;
/// Most of a data-stack chunk read in one go (the newest part; older frames are read as needed).
const MAX_CHUNK_READ: u64 = 256 << 10;
/// Bytes past the data stack's top read with it: frames the thread pushes between the walk's first
/// read and a later read of its current frame are then in the same copy.
const CHUNK_MARGIN: u64 = 2048;
/// Copies of a moving stack compared (see `read_chain`) before it is given up as torn.
const SNAPSHOT_ROUNDS: usize = 4;
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
            _ if e.kind() == io::ErrorKind::InvalidData
                || e.kind() == io::ErrorKind::UnexpectedEof =>
            {
                WalkError::Torn
            }
            _ => WalkError::Io(e),
        }
    }
}

/// What identifies a code object at an address, compared with the object there at its first use in
/// every pass (threads of one pass share their code objects, and a pass lasts well under a
/// millisecond): its
/// name, file and line-table pointers, first line and size (3.10: its bytecode object instead), and
/// on 3.12+ its `co_version`, which the interpreter numbers afresh for every code object it makes.
/// A code object freed and another made at its address (`exec`, `compile`, a class defined again)
/// misses unless all of these match, and then it is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CodeKey {
    filename: u64,
    name: u64,
    linetable: u64,
    firstlineno: i32,
    argcount: i32,
    /// 3.10: `co_code`; 3.11: `ob_size` (code units); 3.12+: `co_version`.
    identity: u64,
}

struct CodeInfo {
    key: CodeKey,
    /// The pass (`CodeCache::new_pass`) in which the key was last compared with the object.
    checked_pass: u64,
    /// Interpreter-owned code (3.13 shims): its frames are not shown, as tracebacks leave them out.
    shim: bool,
    /// `co_qualname` (3.11+) or `co_name` (3.10).
    function: String,
    /// 3.10: whether the class comes from the first argument.
    first_arg: FirstArg,
    file: String,
    firstlineno: i32,
    linetable: Vec<u8>,
}

/// Decoded code objects by address, checked against the object at that address once per pass (see
/// `CodeKey`); (3.10) class names of methods' first arguments; and (3.10) the pages that held each
/// thread's frames at its last walk (see `FrameWalker::read_chain`).
#[derive(Default)]
pub struct CodeCache {
    map: HashMap<u64, CodeInfo>,
    types: TypeNames,
    frame_pages: HashMap<u64, Vec<(u64, usize)>>,
    /// 3.10: per thread state, the frame addresses of its last whole walk, innermost first (at most
    /// `MAX_PRIOR_FRAMES`, the outermost): where `FrameWalker::outer_part` looks when no copy holds
    /// a whole chain from the current frame.
    last_chains: HashMap<u64, Vec<u64>>,
    /// Sampling passes begun; a code object is compared with its address once per pass.
    pass: u64,
}

/// Most pages remembered per thread: a deep 3.10 stack's frames beyond them are read as needed.
const MAX_FRAME_PAGES: usize = 8;
/// Outermost frames of a thread's last walk remembered (3.10, see `CodeCache::last_chains`).
const MAX_PRIOR_FRAMES: usize = 256;

impl CodeCache {
    /// A new sampling pass: every code object is compared with its address again at its first use.
    pub fn new_pass(&mut self) {
        self.pass += 1;
    }

    fn remember_pages(&mut self, tstate: u64, mut pages: Vec<(u64, usize)>) {
        // Only page-sized blocks: frame objects, not a large read that went straight through.
        pages.retain(|&(_, len)| len <= 4096);
        pages.truncate(MAX_FRAME_PAGES);
        if self.frame_pages.len() > 4096 {
            self.frame_pages.clear(); // thread states come and go: never grow without bound
        }
        self.frame_pages.insert(tstate, pages);
    }

    fn remember_chain(&mut self, tstate: u64, mut addrs: Vec<u64>) {
        if addrs.len() > MAX_PRIOR_FRAMES {
            addrs.drain(..addrs.len() - MAX_PRIOR_FRAMES);
        }
        if self.last_chains.len() > 4096 {
            self.last_chains.clear();
        }
        self.last_chains.insert(tstate, addrs);
    }

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
    /// Copies compared beyond the first by the last walk (0: accepted as first read; see
    /// `read_chain`).
    pub rounds: std::cell::Cell<usize>,
    /// Per frame of the last walk: whether it is the outermost of its evaluation-loop call.
    pub call_ends: std::cell::RefCell<Vec<bool>>,
    /// When no two copies agree on the whole stack, keep the outer frames they agree on under
    /// `MOVING_FRAMES` rather than fail (the sampler's choice: see `outer_part`).
    pub keep_outer_part: bool,
    /// Whether the last walk returned only its outer part.
    pub outer_only: std::cell::Cell<bool>,
    /// Whether the last walk stopped at `MAX_DEPTH` frames, short of the thread's first frame.
    pub cut: std::cell::Cell<bool>,
    /// Frame addresses of the last whole chain read, innermost first (3.10 keeps them per thread).
    chain_addrs: std::cell::RefCell<Vec<u64>>,
}

/// The frame standing for the inner frames of a stack that kept moving while it was read (see
/// `FrameWalker::outer_part`): a Python frame without file or line.
pub const MOVING_FRAMES: &str = "(inner frames moving)";
/// The frame standing for the outer frames of a stack deeper than `MAX_DEPTH`, which are not read.
pub const CUT_FRAMES: &str = "(outer frames not read)";

impl<'a> FrameWalker<'a> {
    pub fn new(mem: &'a dyn Memory, layout: &'a Layout, code_type: Option<u64>) -> Self {
        let l = layout;
        // 3.10 reads the first local with the frame, for the method's class (no co_qualname).
        let first_local = if l.code_qualname.is_none() {
            l.frame_localsplus
        } else {
            None
        };
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
            l.code_version,
            Some(l.code_flags),
            Some(l.varobject_size),
            Some(l.object_type),
        ]
        .iter()
        .flatten()
        .max()
        .copied()
        .unwrap()
            + 8;
        FrameWalker {
            mem,
            layout,
            code_type,
            frame_read_len: frame_read_len as usize,
            code_read_len: code_read_len as usize,
            rounds: Default::default(),
            call_ends: Default::default(),
            keep_outer_part: false,
            outer_only: Default::default(),
            cut: Default::default(),
            chain_addrs: Default::default(),
        }
    }

    /// Address of the innermost frame of a thread state (already read into `tstate_bytes` when
    /// possible).
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
        Ok(self
            .mem
            .read_u64(cframe + l.cframe_current_frame.unwrap())?)
    }

    /// The thread's current frame as the walk's first read sees it, with the used part of its
    /// data-stack chunk (3.11+) loaded into `reads` in one read: the frames a walk visits are then
    /// copied out of one snapshot instead of read one by one. The current-frame pointer and the
    /// chunk bounds come from one read of the thread state, so they belong together.
    /// `head`, when given, is those three fields as read earlier in the pass (with the thread
    /// list): a stack that moved since fails the recheck at the end of the walk like any other.
    fn start_walk(
        &self,
        tstate: u64,
        head: Option<WalkHead>,
        reads: &BlockCache,
    ) -> Result<u64, WalkError> {
        let l = self.layout;
        let (Some(chunk_off), Some(top_off)) = (l.tstate_datastack_chunk, l.tstate_datastack_top)
        else {
            return self.top_frame(tstate);
        };
        let frame_off = l
            .tstate_current_frame
            .or(l.tstate_cframe)
            .ok_or(WalkError::Torn)?;
        let WalkHead {
            frame_ptr: ptr,
            chunk,
            top,
        } = match head {
            Some(h) => h,
            None => {
                let lo = frame_off.min(chunk_off).min(top_off);
                let hi = frame_off.max(chunk_off).max(top_off) + 8;
                let mut buf = vec![0u8; (hi - lo) as usize];
                self.mem.read(tstate + lo, &mut buf)?;
                WalkHead {
                    frame_ptr: u64_at(&buf, frame_off - lo),
                    chunk: u64_at(&buf, chunk_off - lo),
                    top: u64_at(&buf, top_off - lo),
                }
            }
        };
        let first = match (l.tstate_cframe, l.cframe_current_frame) {
            // Not through `reads`: the C-stack page would be copied again with the frames.
            (Some(_), Some(cf_off)) if ptr != 0 => self.mem.read_u64(ptr + cf_off)?,
            (Some(_), _) => 0,
            _ => ptr,
        };
        if chunk != 0 && top > chunk {
            // A very deep stack: the newest frames are the ones every walk visits.
            let from = chunk.max(top.saturating_sub(MAX_CHUNK_READ));
            // With a margin past the top, up to a page boundary (the chunk is page-aligned memory);
            // without it if the chunk ends there. Failing only costs the shortcut: the walk then
            // reads frame by frame.
            let end = (top + CHUNK_MARGIN + 4095) & !4095;
            if reads.load(from, (end - from) as usize).is_err() {
                let _ = reads.load(from, (top - from) as usize);
            }
        }
        Ok(first)
    }

    /// The thread's stack, innermost first, and where the innermost frame stands (code,
    /// instruction).
    ///
    /// Frames are read through a per-walk `BlockCache` (3.11+: the data-stack chunk in one read;
    /// frames elsewhere, such as generators' and 3.10's heap frames, a page at a time).
    ///
    /// Consistency rules, any failure being `Torn`:
    /// - the thread's current frame, read again from the target after the walk, is the one the walk
    ///   started from (the stack did not move under us; a stack that moved and came back to the
    ///   same address is not caught by this);
    /// - 3.10: every frame is live (`f_state` executing or unwinding; the innermost may also be
    ///   just created or resuming). Freed frames keep their `f_code` and link through `f_back` into
    ///   the free list, which ends in NULL: without this a walk reaching a freed frame ends early
    ///   or runs on through unrelated frames;
    /// - 3.11: the outermost frame is an entry frame (`is_entry`: entered from C, as a thread's
    ///   first frame always is); 3.12+: it is the shim frame the first C caller pushed (owner
    ///   `FRAME_OWNED_BY_CSTACK`; 3.14+: owned by the interpreter, `FRAME_OWNED_BY_INTERPRETER`). A
    ///   chain ending anywhere else ran into stale memory.
    pub fn walk(&self, tstate: u64, cache: &mut CodeCache) -> Result<Walked, WalkError> {
        self.walk_from(tstate, None, true, cache)
    }

    /// `walk`, starting from a thread-state head read earlier (see `start_walk`). `moving`: the
    /// thread may run Python code during the walk (it holds the GIL, or that is unknown); only then
    /// does 3.10 read each frame's link again after the walk.
    pub fn walk_from(
        &self,
        tstate: u64,
        head: Option<WalkHead>,
        moving: bool,
        cache: &mut CodeCache,
    ) -> Result<Walked, WalkError> {
        self.walk_located(tstate, head, moving, cache, None)
    }

    /// `walk_from`, also giving each frame's instruction position (3.11+: line and column ranges,
    /// as `co_positions()` has them; None on 3.10 and for a frame that has run no instruction yet),
    /// in the order of the frames. Decoded in the same pass over the location table as the line.
    pub fn walk_with_positions(
        &self,
        tstate: u64,
        head: Option<WalkHead>,
        moving: bool,
        cache: &mut CodeCache,
    ) -> Result<(Walked, Vec<Option<Position>>), WalkError> {
        let mut positions = Vec::with_capacity(32);
        let walked = self.walk_located(tstate, head, moving, cache, Some(&mut positions))?;
        Ok((walked, positions))
    }

    fn walk_located(
        &self,
        tstate: u64,
        head: Option<WalkHead>,
        moving: bool,
        cache: &mut CodeCache,
        mut positions: Option<&mut Vec<Option<Position>>>,
    ) -> Result<Walked, WalkError> {
        // Read the whole chain first and check it before decoding anything: the window in which the
        // thread can move its stack under us is then only as long as the reads themselves.
        let pages = cache.frame_pages.get(&tstate).cloned().unwrap_or_default();
        let prior = cache.last_chains.get(&tstate).cloned().unwrap_or_default();
        let (chain, used) = self.read_chain(tstate, head, moving, &pages, &prior)?;
        if l_is_310(self.layout) {
            cache.remember_pages(tstate, used);
            cache.remember_chain(tstate, self.chain_addrs.take());
        }
        let mut out = Vec::with_capacity(chain.len() + 1);
        let mut top = None;
        let mut ends = Vec::with_capacity(chain.len() + 1);
        if self.outer_only.get() {
            out.push(Frame {
                function: MOVING_FRAMES.to_owned(),
                file: String::new(),
                line: -1,
            });
            ends.push(false);
            if let Some(p) = positions.as_deref_mut() {
                p.push(None);
            }
        }
        // Where the innermost frame stands, unless the innermost frames are unknown.
        let mut top_wanted = !self.outer_only.get();
        // Code objects, their names and line tables tend to share pages (unmarshalled together).
        let code_reads = BlockCache::new(self.mem);
        let want = positions.is_some();
        for &(code, instr, first_local, call_end) in &chain {
            if let Some((f, at)) =
                self.frame_and_position(code, instr, first_local, cache, &code_reads, want)?
            {
                if top_wanted {
                    top = Some((code, instr));
                    top_wanted = false;
                }
                out.push(f);
                ends.push(call_end);
                if let Some(p) = positions.as_deref_mut() {
                    p.push(at);
                }
            } else if call_end {
                // A hidden frame ended its call: the frame inside it is then the call's outermost.
                if let Some(last) = ends.last_mut() {
                    *last = true;
                }
            }
        }
        if self.cut.get() && !self.outer_only.get() {
            out.push(Frame {
                function: CUT_FRAMES.to_owned(),
                file: String::new(),
                line: -1,
            });
            ends.push(true);
            if let Some(p) = positions {
                p.push(None);
            }
        }
        self.call_ends.replace(ends);
        Ok((out, top))
    }

    /// (code, instruction, first local) of every frame with code, innermost first, checked as
    /// `walk` describes.
    ///
    /// The whole chain is read from one copy (`reads`: 3.11+ the data-stack chunk in one read,
    /// other frames a page at a time), then the thread's current frame is read again. If it is the
    /// frame the walk started from, the stack is taken as it was read (3.10 frames that may have
    /// moved are compared with a second copy first, see below). A thread that calls all the time
    /// has moved by then on nearly every walk; its stack is not dropped for that. Instead the same
    /// memory is read again, a second copy, and the chain from the current frame just read (which
    /// the thread was in between the two copies) must be in both copies, every frame's code, link,
    /// owner and instruction the same in both (the innermost frame's instruction excepted: it
    /// runs). Each frame then held those values all through the time between its two copies, and
    /// all those spans contain the moment the current frame was read: the chain is the thread's
    /// stack at that moment, whatever the thread did before or after. If the current frame moved
    /// out of the copies, or a frame changed between them, the current frame is read again and the
    /// next copy is compared with the last, up to `SNAPSHOT_ROUNDS` times.
    ///
    /// `pages` (3.10) are the blocks that held this thread's frames at its last walk: a thread that
    /// may move has them in the first copy, so that a chain that moved to frames on another of its
    /// pages can be compared at once. Returns the chain and the blocks the accepted copy held.
    fn read_chain(
        &self,
        tstate: u64,
        head: Option<WalkHead>,
        moving: bool,
        pages: &[(u64, usize)],
        prior: &[u64],
    ) -> Result<(Vec<CodeFrame>, Pages), WalkError> {
        let l = self.layout;
        self.rounds.set(0);
        self.outer_only.set(false);
        self.cut.set(false);
        let reads = BlockCache::new(self.mem);
        if moving {
            for &(at, len) in pages {
                // A page freed since only costs its read.
                let _ = reads.load(at, len);
            }
        }
        let first = self.start_walk(tstate, head, &reads)?;
        let walked = self.chain(&reads, first);
        // A fresh read, not the cached one: did the stack move while we read it?
        let (mut top, mut depth) = if first != 0 || walked.is_err() {
            self.top_frame_and_depth(tstate)?
        } else {
            (0, None)
        };
        let moved = !matches!(&walked, Ok(chain) if top == first && !too_deep(chain, depth));
        if let Ok(chain) = &walked {
            // 3.10: a stack that moved and came back to the same frame can leave a chain of frames
            // each live when read but never all at once, deeper than the thread is; every frame's
            // evaluation counts in the recursion counter, so a real chain is never longer. And
            // frame objects are heap blocks read a page at a time, so a chain can join pages read
            // at different moments: a thread that may run has its frames compared with a second
            // copy.
            let recheck_links = moving;
            if top == first && !too_deep(chain, depth) && !recheck_links {
                self.chain_addrs
                    .replace(chain.iter().map(|f| f.addr).collect());
                return Ok((frames_with_code(l, chain), reads.ranges()));
            }
        }
        let mut before = reads;
        for round in 1..=SNAPSHOT_ROUNDS {
            let after = before.reread()?;
            if moved || round > 1 {
                self.rounds.set(round);
            }
            if let Some(chain) = self.stable_chain(&before, &after, top, depth)? {
                self.chain_addrs
                    .replace(chain.iter().map(|f| f.addr).collect());
                return Ok((frames_with_code(l, &chain), after.ranges()));
            }
            if round == SNAPSHOT_ROUNDS && self.keep_outer_part {
                let part = self
                    .outer_part(&before, &after, top)
                    .or_else(|| self.loose_outer_part(&before, &after, top, prior));
                let part = match part {
                    Some(part) => Some(part),
                    None => match self.live_outer_part(tstate, prior) {
                        Some((chain, true)) => {
                            // Every frame held still between its two reads: the whole stack after
                            // all.
                            self.chain_addrs
                                .replace(chain.iter().map(|f| f.addr).collect());
                            return Ok((frames_with_code(l, &chain), after.ranges()));
                        }
                        Some((part, false)) => Some(part),
                        None => self.prior_outer_part(&before, &after, prior),
                    },
                };
                if let Some(part) = part {
                    self.outer_only.set(true);
                    // The next walk's prior: the frames this one knows to be the stack's outer
                    // part.
                    self.chain_addrs
                        .replace(part.iter().map(|f| f.addr).collect());
                    return Ok((frames_with_code(l, &part), after.ranges()));
                }
            }
            (top, depth) = self.top_frame_and_depth(tstate)?;
            before = after;
        }
        Err(WalkError::Torn)
    }

    /// The chain from `top` (the current frame, read after `before` was copied and before `after`)
    /// if it is whole in `before` and every frame is the same in `after` (see `read_chain`); None
    /// when it is not. Frames missing from `before` are loaded into `after`, for the next round.
    fn stable_chain(
        &self,
        before: &BlockCache,
        after: &BlockCache,
        top: u64,
        depth: Option<i64>,
    ) -> Result<Option<Vec<RawFrame>>, WalkError> {
        let copied = CopiedOnly {
            cache: before,
            missed: std::cell::Cell::new(None),
        };
        let chain = match self.chain(&copied, top) {
            Ok(chain) => chain,
            Err(WalkError::Torn) => {
                // The chain went past what `before` holds: have `after` hold all of it as it is
                // now, so that the next round can compare it.
                if copied.missed.get().is_some() {
                    let _ = self.chain(after, top);
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if too_deep(&chain, depth) {
            return Ok(None);
        }
        let mut chain = chain;
        let mut buf = vec![0u8; self.frame_read_len];
        for (i, f) in chain.iter_mut().enumerate() {
            if !after.read_cached(f.addr, &mut buf) {
                return Ok(None);
            }
            let g = self.raw_frame(f.addr, &buf);
            let same = if i == 0 {
                (f.code, f.previous, f.owner, f.entry) == (g.code, g.previous, g.owner, g.entry)
            } else {
                (f.code, f.previous, f.owner, f.entry, f.instr, f.state)
                    == (g.code, g.previous, g.owner, g.entry, g.instr, g.state)
            };
            if !same {
                return Ok(None);
            }
            if i == 0 {
                // The innermost frame where the later copy has it: the nearer to decoding, the less
                // likely its code object was replaced at the same address in between.
                f.instr = g.instr;
            }
        }
        Ok(Some(chain))
    }

    /// A stack that never read the same in two copies (a thread calling and returning all the time)
    /// still has outer frames that held still: dropping the whole sample would take its time from
    /// the functions it is in, and call-heavy code would read smaller than it is. The chain from
    /// `top` (the current frame, read between the copies) is walked in one copy, whole down to the
    /// thread's first frame, and compared with the other from the outermost frame inwards: frames
    /// with the same code, link, owner and state in both are kept, up to and including the first
    /// whose instruction moved (it ran between the copies, so nothing inside it held still). None
    /// when neither copy holds a whole chain from `top` or not one frame agrees; also None when all
    /// agree, which `stable_chain` judges.
    fn outer_part(
        &self,
        before: &BlockCache,
        after: &BlockCache,
        top: u64,
    ) -> Option<Vec<RawFrame>> {
        let mut buf = vec![0u8; self.frame_read_len];
        for (walked, other) in [(after, before), (before, after)] {
            // The later copy may read on past what it holds (3.10 frames are heap blocks read a
            // page at a time): what it reads there is checked against the earlier copy like the
            // rest.
            let copied = CopiedOnly {
                cache: walked,
                missed: std::cell::Cell::new(None),
            };
            let chain = if std::ptr::eq(walked, after) {
                self.chain(after, top)
            } else {
                self.chain(&copied, top)
            };
            let Ok(chain) = chain else { continue };
            let mut keep = chain.len();
            for (i, f) in chain.iter().enumerate().rev() {
                if !other.read_cached(f.addr, &mut buf) {
                    break;
                }
                let g = self.raw_frame(f.addr, &buf);
                if (f.code, f.previous, f.owner, f.entry, f.state)
                    != (g.code, g.previous, g.owner, g.entry, g.state)
                {
                    break;
                }
                keep = i;
                if f.instr != g.instr {
                    break;
                }
            }
            if keep == 0 || keep == chain.len() {
                continue;
            }
            let mut part = chain[keep..].to_vec();
            if !std::ptr::eq(walked, after) {
                // The innermost kept frame where the later copy has it (as `stable_chain` does).
                if after.read_cached(part[0].addr, &mut buf) {
                    part[0].instr = self.raw_frame(part[0].addr, &buf).instr;
                }
            }
            return Some(part);
        }
        None
    }

    /// 3.10, when no copy holds a whole chain from the current frame: the links from `top` followed
    /// through whatever they reach (a freed frame keeps its link to its caller), and the outer
    /// frames kept that are live (executing) and the same in both copies, down to the thread's own
    /// first frame (the outermost of its last whole walk, `prior`): a chain that wandered into
    /// freed frames or another thread's stack does not end there. Kept up to and including the
    /// first frame whose instruction moved, as in `outer_part`.
    fn loose_outer_part(
        &self,
        before: &BlockCache,
        after: &BlockCache,
        top: u64,
        prior: &[u64],
    ) -> Option<Vec<RawFrame>> {
        let (Some(_), Some(&bottom)) = (self.layout.frame_state, prior.last()) else {
            return None;
        };
        for (walked, other) in [(after, before), (before, after)] {
            let is_after = std::ptr::eq(walked, after);
            let read = |addr: u64, buf: &mut [u8]| {
                walked.read_cached(addr, buf) || (is_after && walked.read(addr, buf).is_ok())
            };
            let Some(chain) = self.loose_chain(top, bottom, read) else {
                continue;
            };
            // A frame the other copy does not hold is read again now: a second look all the same.
            let again = |addr: u64, buf: &mut [u8]| {
                other.read_cached(addr, buf) || self.mem.read(addr, buf).is_ok()
            };
            let Some((keep, instr)) = self.executing_suffix(&chain, again) else {
                continue;
            };
            let mut part = chain[keep..].to_vec();
            if !is_after {
                // The innermost kept frame where the later copy has it.
                part[0].instr = instr;
            }
            return Some(part);
        }
        None
    }

    /// 3.10, as `loose_outer_part`, from the current frame read now and through live memory, one
    /// frame per read (the walk goes down while the thread's calls come and go above it), each kept
    /// frame read a second time after the walk. `true` with it: every frame held still between its
    /// two reads (the innermost's instruction excepted), so the chain is the whole stack at a
    /// moment between the walk and the second reads.
    fn live_outer_part(&self, tstate: u64, prior: &[u64]) -> Option<(Vec<RawFrame>, bool)> {
        let (Some(_), Some(&bottom)) = (self.layout.frame_state, prior.last()) else {
            return None;
        };
        let read = |addr: u64, buf: &mut [u8]| self.mem.read(addr, buf).is_ok();
        let top = self.top_frame(tstate).ok()?;
        let chain = self.loose_chain(top, bottom, read)?;
        let (keep, instr) = self.executing_suffix(&chain, read)?;
        let mut part = chain[keep..].to_vec();
        part[0].instr = instr;
        // Whole only if the thread is still in the frame the walk began with (it pushed none
        // since).
        let whole = keep == 0 && self.top_frame(tstate).ok() == Some(top);
        Some((part, whole))
    }

    /// 3.10: the frames from `top` by their links, read with `read`, wherever they lead (a freed
    /// frame keeps its link to its caller); None unless they end at `bottom`, the thread's first
    /// frame.
    fn loose_chain(
        &self,
        top: u64,
        bottom: u64,
        read: impl Fn(u64, &mut [u8]) -> bool,
    ) -> Option<Vec<RawFrame>> {
        let mut buf = vec![0u8; self.frame_read_len];
        let mut chain: Vec<RawFrame> = Vec::new();
        let mut frame = top;
        let mut revisits = Revisits::default();
        while frame != 0 && chain.len() < MAX_DEPTH {
            if revisits.again(chain.len(), frame) || !read(frame, &mut buf) {
                return None;
            }
            let f = self.raw_frame(frame, &buf);
            if f.previous == frame {
                return None;
            }
            frame = f.previous;
            chain.push(f);
        }
        chain
            .last()
            .is_some_and(|f| f.addr == bottom && f.previous == 0)
            .then_some(chain)
    }

    /// 3.10: how much of `chain` held still, from the outermost frame inwards: frames executing and
    /// the same in a second look (`again`), up to and including the first whose instruction moved
    /// (the innermost frame's instruction is not compared: it runs). The index of the innermost
    /// frame kept and its instruction in the second look; None if not even the outermost frame
    /// held.
    fn executing_suffix(
        &self,
        chain: &[RawFrame],
        again: impl Fn(u64, &mut [u8]) -> bool,
    ) -> Option<(usize, i64)> {
        let mut buf = vec![0u8; self.frame_read_len];
        let mut kept = None;
        for (i, f) in chain.iter().enumerate().rev() {
            if !again(f.addr, &mut buf) {
                break;
            }
            let g = self.raw_frame(f.addr, &buf);
            let live = matches!(f.state, FRAME_EXECUTING | FRAME_UNWINDING);
            if !live
                || (f.code, f.previous, f.state, f.first_local)
                    != (g.code, g.previous, g.state, g.first_local)
            {
                break;
            }
            kept = Some((i, g.instr));
            if f.instr != g.instr {
                break;
            }
        }
        kept
    }

    /// 3.10, when no copy holds a whole chain from the current frame (a thread that calls all the
    /// time frees and makes frame objects faster than two copies can agree on them): the outer
    /// frames of the thread's last whole walk that are live (executing) in both copies, linked as
    /// they were, with the same fields in both. A 3.10 frame is executing only while its call runs
    /// (its state changes when it returns), so such frames are still the outer part of the stack;
    /// later versions leave a returned frame's memory as it was, so they are not looked at this
    /// way. Kept up to and including the first whose instruction moved, as in `outer_part`.
    fn prior_outer_part(
        &self,
        before: &BlockCache,
        after: &BlockCache,
        prior: &[u64],
    ) -> Option<Vec<RawFrame>> {
        if self.layout.frame_state.is_none() || prior.is_empty() {
            return None;
        }
        let mut buf = vec![0u8; self.frame_read_len];
        let mut part: Vec<RawFrame> = Vec::new();
        let mut outer = 0u64; // the previous frame the next one inwards must link to
        for &addr in prior.iter().rev() {
            if !before.read_cached(addr, &mut buf) {
                break;
            }
            let f = self.raw_frame(addr, &buf);
            if !after.read_cached(addr, &mut buf) {
                break;
            }
            let g = self.raw_frame(addr, &buf);
            let live = matches!(f.state, FRAME_EXECUTING | FRAME_UNWINDING);
            if !live
                || f.previous != outer
                || (f.code, f.previous, f.state, f.first_local)
                    != (g.code, g.previous, g.state, g.first_local)
            {
                break;
            }
            let moved = f.instr != g.instr;
            part.push(RawFrame {
                instr: g.instr,
                ..f
            });
            outer = addr;
            if moved {
                break;
            }
        }
        if part.is_empty() {
            return None;
        }
        part.reverse();
        Some(part)
    }

    /// The fields of the frame at `addr` whose first `frame_read_len` bytes are `buf`.
    fn raw_frame(&self, addr: u64, buf: &[u8]) -> RawFrame {
        let l = self.layout;
        let instr: i64 = if l.version.1 == 10 {
            i32_at(buf, l.frame_instr) as i64
        } else {
            u64_at(buf, l.frame_instr) as i64
        };
        RawFrame {
            addr,
            code: l.frame_code_ptr(u64_at(buf, l.frame_code)),
            previous: u64_at(buf, l.frame_previous),
            instr,
            state: l
                .frame_state
                .map(|off| buf[off as usize] as i8)
                .unwrap_or(0),
            owner: l.frame_owner.map(|off| buf[off as usize]).unwrap_or(0),
            entry: l.frame_is_entry.map(|off| buf[off as usize]).unwrap_or(0),
            first_local: match (l.code_qualname, l.frame_localsplus) {
                (None, Some(off)) => u64_at(buf, off),
                _ => 0,
            },
        }
    }

    /// Every frame from `first` down, innermost first, read through `mem`, with the checks that
    /// need no second read: no cycle, not too deep, 3.10 frames live, the outermost frame where a
    /// thread's stack starts.
    fn chain(&self, mem: &dyn Memory, first: u64) -> Result<Vec<RawFrame>, WalkError> {
        let l = self.layout;
        let mut out = Vec::new();
        let mut frame = first;
        let mut buf = vec![0u8; self.frame_read_len];
        self.cut.set(false);
        let mut revisits = Revisits::default();
        while frame != 0 {
            if out.len() >= MAX_DEPTH {
                self.cut.set(true);
                return Ok(out);
            }
            if revisits.again(out.len(), frame) {
                return Err(WalkError::Torn);
            }
            mem.read(frame, &mut buf)?;
            let f = self.raw_frame(frame, &buf);
            if l.frame_state.is_some() {
                let live = matches!(f.state, FRAME_EXECUTING | FRAME_UNWINDING)
                    || (frame == first && matches!(f.state, FRAME_CREATED | FRAME_SUSPENDED));
                // A frame that is only being set up with nothing before it is a spare frame caught
                // mid-reuse (3.10 keeps freed frames and relinks them), not a thread's first frame
                // being entered: dropping that rare real case costs one sample.
                if !live || (f.previous == 0 && matches!(f.state, FRAME_CREATED | FRAME_SUSPENDED))
                {
                    return Err(WalkError::Torn);
                }
            }
            let owner = l.frame_owner.map(|_| f.owner);
            if f.previous == 0 && !self.is_thread_bottom(&buf, owner) {
                return Err(WalkError::Torn);
            }
            if f.previous == frame {
                return Err(WalkError::Torn);
            }
            frame = f.previous;
            out.push(f);
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
        Ok((
            u64_at(&head, frame_off - lo),
            Some(i32_at(&head, depth_off - lo) as i64),
        ))
    }

    /// Whether a frame with no previous frame is where a thread's stack starts.
    fn is_thread_bottom(&self, buf: &[u8], owner: Option<u8>) -> bool {
        let l = self.layout;
        if let Some(off) = l.frame_is_entry {
            return buf[off as usize] == 1;
        }
        if l.version.1 >= 12 {
            // The shim a C caller pushes (3.12, 3.13), the interpreter's entry or base frame
            // (3.14+).
            return owner.is_some_and(|o| l.is_interpreter_owner(o));
        }
        true // 3.10: liveness of every frame is checked instead
    }

    /// 3.10: C calls in progress on the thread's stack, as far as the recursion counter tells: its
    /// `recursion_depth` less its number of frames (each frame's evaluation adds one, and so does
    /// every C function called through the call protocol, which on 3.10 is every call a bytecode
    /// makes). 0 means the thread is in the eval loop of its innermost frame and in no C function,
    /// so a thread without the GIL there is in the eval breaker's GIL handoff. None on other
    /// versions.
    pub fn calls_in_progress(&self, tstate: u64) -> Result<Option<i64>, WalkError> {
        let l = self.layout;
        let (mut frame, Some(depth)) = self.top_frame_and_depth(tstate)? else {
            return Ok(None);
        };
        let reads = BlockCache::new(self.mem);
        let mut frames = 0i64;
        let mut revisits = Revisits::default();
        while frame != 0 {
            frames += 1;
            if frames as usize > MAX_DEPTH || revisits.again(frames as usize, frame) {
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
        // Only shim frames come before the first frame with code: a few, never thousands.
        for _ in 0..UNCHECKED_DEPTH {
            if frame == 0 {
                return Ok(None);
            }
            self.mem.read(frame, &mut buf)?;
            let code = l.frame_code_ptr(u64_at(&buf, l.frame_code));
            let shim = l
                .frame_owner
                .is_some_and(|off| l.is_interpreter_owner(buf[off as usize]));
            if !shim && code != 0 {
                let instr: i64 = if l.version.1 == 10 {
                    i32_at(&buf, l.frame_instr) as i64
                } else {
                    u64_at(&buf, l.frame_instr) as i64
                };
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
    pub fn decode_frame(
        &self,
        code: u64,
        instr: i64,
        cache: &mut CodeCache,
        mem: &dyn Memory,
    ) -> Result<Option<Frame>, WalkError> {
        self.frame_at(code, instr, 0, cache, mem)
    }

    /// Decodes one frame; `Ok(None)` for a 3.13 frame whose executable is not a code object or is
    /// an interpreter shim.
    /// `first_local` is the frame's first local variable (3.10 only, else 0).
    fn frame_at(
        &self,
        code: u64,
        instr: i64,
        first_local: u64,
        cache: &mut CodeCache,
        mem: &dyn Memory,
    ) -> Result<Option<Frame>, WalkError> {
        Ok(self
            .frame_and_position(code, instr, first_local, cache, mem, false)?
            .map(|(f, _)| f))
    }

    /// `frame_at`, with the instruction's position when `want` (3.11+).
    fn frame_and_position(
        &self,
        code: u64,
        instr: i64,
        first_local: u64,
        cache: &mut CodeCache,
        mem: &dyn Memory,
        want: bool,
    ) -> Result<Option<(Frame, Option<Position>)>, WalkError> {
        let l = self.layout;
        // Checked every pass: an address decoded once may hold another code object by now.
        let checked = cache
            .map
            .get(&code)
            .is_some_and(|c| c.checked_pass == cache.pass);
        if checked && cache.map.get(&code).is_some_and(|c| c.shim) {
            return Ok(None);
        }
        if !checked && !self.refresh_code(code, cache, mem)? {
            return Ok(None);
        }
        let info = cache.map.get(&code).unwrap();
        let (mut frame, at) = self
            .located(info, code, instr, want)
            .ok_or(WalkError::Torn)?;
        if let Some(class) = cache.types.class_of(mem, l, info.first_arg, first_local) {
            frame.function = format!("{class}.{}", frame.function);
        }
        Ok(Some((frame, at)))
    }

    /// The identity of the code object whose header is `head` (see `CodeKey`).
    fn code_key(&self, head: &[u8]) -> CodeKey {
        let l = self.layout;
        let identity = match (l.code_version, l.code_code) {
            (Some(off), _) => {
                u32::from_le_bytes(head[off as usize..off as usize + 4].try_into().unwrap()) as u64
            }
            (None, Some(off)) => u64_at(head, off),
            (None, None) => u64_at(head, l.varobject_size),
        };
        CodeKey {
            filename: u64_at(head, l.code_filename),
            name: u64_at(head, l.code_qualname.unwrap_or(l.code_name)),
            linetable: u64_at(head, l.code_linetable),
            firstlineno: i32_at(head, l.code_firstlineno),
            argcount: i32_at(head, l.code_argcount),
            identity,
        }
    }

    /// Makes sure `cache` holds the code object at `code`, as it is now; false for a frame not to
    /// show: a 3.13 executable that is not a code object, or interpreter-owned shim code.
    fn refresh_code(
        &self,
        code: u64,
        cache: &mut CodeCache,
        mem: &dyn Memory,
    ) -> Result<bool, WalkError> {
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
        let key = self.code_key(&head);
        let pass = cache.pass;
        if let Some(c) = cache.map.get_mut(&code).filter(|c| c.key == key) {
            c.checked_pass = pass;
            return Ok(!c.shim);
        }
        // 3.13+: `CO_NO_MONITORING_EVENTS` marks the code objects the interpreter makes for itself
        // (the `__init__` cleanup shim of `CALL_ALLOC_AND_ENTER_INIT`); earlier versions use the
        // bit otherwise.
        let shim = l
            .code_flag_shim
            .is_some_and(|bit| i32_at(&head, l.code_flags) as u32 as u64 & bit != 0);
        let function = read_unicode(mem, l, key.name)?;
        let file = read_unicode(mem, l, key.filename)?;
        let linetable = read_bytes(mem, l, key.linetable, MAX_LINETABLE)?;
        let first_arg = match l.code_varnames {
            Some(off) => self.first_arg(u64_at(&head, off), key.argcount),
            None => FirstArg::Plain,
        };
        cache.map.insert(
            code,
            CodeInfo {
                key,
                checked_pass: pass,
                shim,
                function,
                first_arg,
                file,
                firstlineno: key.firstlineno,
                linetable,
            },
        );
        Ok(!shim)
    }

    /// 3.10: what the first parameter (`co_varnames[0]`) says about the code's class; read once per
    /// code object. A failed read only loses the class.
    fn first_arg(&self, varnames: u64, argcount: i32) -> FirstArg {
        if argcount <= 0 || varnames == 0 {
            return FirstArg::Plain;
        }
        let l = self.layout;
        let name = self
            .mem
            .read_u64(varnames + l.tuple_item)
            .ok()
            .and_then(|p| read_unicode(self.mem, l, p).ok());
        name.map(|n| FirstArg::of(argcount, &n))
            .unwrap_or(FirstArg::Plain)
    }

    /// The frame for a decoded code object at an instruction position; None when the position is
    /// outside the code (the frame or code changed while we read them).
    /// With `want` (3.11+), also the instruction's position (the same line, and its column range).
    fn located(
        &self,
        info: &CodeInfo,
        code: u64,
        instr: i64,
        want: bool,
    ) -> Option<(Frame, Option<Position>)> {
        let l = self.layout;
        let mut at = None;
        let line = if l.version.1 == 10 {
            line_310(&info.linetable, info.firstlineno, instr.max(0) * 2)
        } else {
            let first = code as i64 + l.code_code_adaptive.unwrap() as i64;
            let index = (instr - first) / 2;
            if index < 0 {
                info.firstlineno // frame created, no instruction run yet
            } else if want {
                let p = position_311(&info.linetable, info.firstlineno, index)?;
                at = Some(p);
                p.line
            } else {
                line_311(&info.linetable, info.firstlineno, index)?
            }
        };
        // A module's RESUME sits at line 0 (3.11+; `f_lineno` reads 0 there too): a module frame
        // that has not run a line yet, at process start or in an import, is put at its first line
        // like a new frame.
        if line <= 0 {
            return Some((
                Frame {
                    function: info.function.clone(),
                    file: info.file.clone(),
                    line: info.firstlineno,
                },
                None,
            ));
        }
        Some((
            Frame {
                function: info.function.clone(),
                file: info.file.clone(),
                line,
            },
            at,
        ))
    }
}

/// One frame as read: where it is and the fields a walk checks and decodes.
#[derive(Debug, Clone, Copy)]
struct RawFrame {
    addr: u64,
    code: u64,
    previous: u64,
    instr: i64,
    /// 3.10 `f_state` (else 0).
    state: i8,
    /// 3.11+ `owner` (else 0).
    owner: u8,
    /// 3.11 `is_entry` (else 0).
    entry: u8,
    /// 3.10: the first local (a method's `self`/`cls`), else 0.
    first_local: u64,
}

/// (code, instruction, first local, outermost of its call): see `frames_with_code`.
type CodeFrame = (u64, i64, u64, bool);
/// (address, length) of the blocks that held a thread's frames.
type Pages = Vec<(u64, usize)>;

/// (code, instruction, first local) of the frames that have code, leaving out 3.12+ shim frames.
/// The fourth value says whether the frame is the outermost one of its evaluation-loop call (see
/// `native::merge`): every frame on 3.10, an entry frame on 3.11, the frame above a C-stack shim on
/// 3.12+ (and the thread's outermost frame on any).
fn frames_with_code(l: &Layout, chain: &[RawFrame]) -> Vec<CodeFrame> {
    let shim = |f: &RawFrame| l.is_interpreter_owner(f.owner);
    chain
        .iter()
        .enumerate()
        .filter(|(_, f)| !shim(f) && f.code != 0)
        .map(|(i, f)| {
            let ends = if l.frame_state.is_some() {
                true
            } else if l.frame_is_entry.is_some() {
                f.entry == 1 || i + 1 == chain.len()
            } else {
                chain.get(i + 1).is_none_or(shim)
            };
            (f.code, f.instr, f.first_local, ends)
        })
        .collect()
}

/// Frames walked before each further frame's address is remembered: a cycle read from memory that
/// changed under us then ends a walk within `UNCHECKED_DEPTH` frames plus twice its length rather
/// than at `MAX_DEPTH`, and the usual shallow stack pays nothing for the check.
const UNCHECKED_DEPTH: usize = 2048;

#[derive(Default)]
struct Revisits(std::collections::HashSet<u64>);

impl Revisits {
    /// Whether a walk `depth` frames in comes to `frame` a second time (only noticed past
    /// `UNCHECKED_DEPTH`).
    fn again(&mut self, depth: usize, frame: u64) -> bool {
        depth >= UNCHECKED_DEPTH && !self.0.insert(frame)
    }
}

/// 3.10: a chain longer than the thread's recursion counter (read with its current frame) mixes
/// moments (see `read_chain`).
fn too_deep(chain: &[RawFrame], recursion_depth: Option<i64>) -> bool {
    recursion_depth.is_some_and(|d| chain.len() as i64 > d)
}

/// Reads served only from what a `BlockCache` already holds; a miss is a torn read, remembered in
/// `missed` (the copy did not reach that far).
struct CopiedOnly<'a, 'b> {
    cache: &'a BlockCache<'b>,
    missed: std::cell::Cell<Option<u64>>,
}

impl Memory for CopiedOnly<'_, '_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.cache.read_cached(addr, buf) {
            return Ok(());
        }
        self.missed.set(Some(addr));
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not in the copy",
        ))
    }
}

fn l_is_310(l: &Layout) -> bool {
    l.frame_state.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::{BufferMemory, Garbage};
    use std::cell::RefCell;

    /// Garbage that changes under the reader: after every read a few words are written anew, so no
    /// two copies agree and the walker's fallbacks for moving stacks (`outer_part` and the 3.10
    /// walks) all run on wild pointers.
    struct Churning {
        mem: RefCell<BufferMemory>,
        garbage: RefCell<Garbage>,
    }

    impl Memory for Churning {
        fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
            self.mem.borrow().read(addr, buf)?;
            let mut g = self.garbage.borrow_mut();
            let mut mem = self.mem.borrow_mut();
            for _ in 0..4 {
                let at = (g.next_word() % (Garbage::LEN / 8) * 8) as usize;
                let word = Garbage::BASE + g.next_word() % Garbage::LEN / 8 * 8;
                mem.bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
            }
            Ok(())
        }
    }

    /// Frames linked `i -> next(i)` in a buffer, 3.12 layout (no per-frame liveness to fake).
    fn linked_frames(
        n: usize,
        next: impl Fn(usize) -> Option<usize>,
    ) -> (BufferMemory, &'static Layout, u64) {
        let l = gilty_layouts::layout_for(3, 12).unwrap();
        const SIZE: u64 = 128;
        let base = 0x10000u64;
        let mut bytes = vec![0u8; n * SIZE as usize];
        for i in 0..n {
            let at = i * SIZE as usize;
            let prev = next(i).map_or(0, |j| base + j as u64 * SIZE);
            bytes[at + l.frame_code as usize..][..8].copy_from_slice(&1u64.to_le_bytes());
            bytes[at + l.frame_previous as usize..][..8].copy_from_slice(&prev.to_le_bytes());
            // FRAME_OWNED_BY_CSTACK (3.12): a thread's bottom frame when nothing precedes it.
            bytes[at + l.frame_owner.unwrap() as usize] = 3;
        }
        (BufferMemory { base, bytes }, l, base)
    }

    /// A stack deeper than `MAX_DEPTH` keeps its innermost `MAX_DEPTH` frames and says it was cut.
    #[test]
    fn a_deeper_stack_is_cut_not_dropped() {
        let n = MAX_DEPTH + 10;
        let (mem, l, first) = linked_frames(n, |i| (i + 1 < n).then_some(i + 1));
        let walker = FrameWalker::new(&mem, l, None);
        let chain = walker.chain(&mem, first).expect("cut, not torn");
        assert_eq!(chain.len(), MAX_DEPTH);
        assert!(walker.cut.get());
        let (mem, l, first) = linked_frames(50, |i| (i + 1 < 50).then_some(i + 1));
        let walker = FrameWalker::new(&mem, l, None);
        assert_eq!(walker.chain(&mem, first).unwrap().len(), 50);
        assert!(!walker.cut.get());
    }

    /// Frames linked in a cycle (a torn read) end the walk as torn, soon after `UNCHECKED_DEPTH`
    /// frames.
    #[test]
    fn a_cycle_of_frames_is_torn() {
        for len in [2usize, 3, 1000] {
            let (mem, l, first) = linked_frames(len, |i| Some((i + 1) % len));
            let walker = FrameWalker::new(&mem, l, None);
            assert!(
                matches!(walker.chain(&mem, first), Err(WalkError::Torn)),
                "cycle of {len}"
            );
            assert!(!walker.cut.get());
        }
    }

    /// Walks that keep outer parts, on memory that never holds still: an error or a bounded stack,
    /// never a panic or a hang, on every version's layout; a stack kept in part has the stand-in
    /// innermost and only there.
    #[test]
    fn moving_garbage_gives_errors_or_bounded_stacks() {
        let mut seed = Garbage::new(0x853c_49e6_748f_ea9bu64);
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            for _ in 0..4 {
                let mem = Churning {
                    mem: RefCell::new(seed.buffer()),
                    garbage: RefCell::new(Garbage::new(seed.next_word() | 1)),
                };
                let mut walker = FrameWalker::new(&mem, l, None);
                walker.keep_outer_part = true;
                let mut cache = CodeCache::default();
                for _ in 0..300 {
                    let tstate = Garbage::BASE + seed.next_word() % Garbage::LEN / 8 * 8;
                    if let Ok((frames, _)) = walker.walk_from(tstate, None, true, &mut cache) {
                        assert!(frames.len() <= MAX_DEPTH + 1);
                        let stand_ins = frames
                            .iter()
                            .filter(|f| f.function == MOVING_FRAMES)
                            .count();
                        assert_eq!(stand_ins, usize::from(walker.outer_only.get()));
                        if walker.outer_only.get() {
                            assert_eq!(frames[0].function, MOVING_FRAMES);
                        }
                    }
                }
            }
        }
    }
}
