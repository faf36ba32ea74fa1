//! Walking a thread's Python frames and turning code objects into (function, file, line).

use crate::linetable::{line_310, line_311};
use crate::process::memory::Memory;
use crate::pyobjects::{read_bytes, read_unicode};
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
/// `_PyInterpreterFrame.owner` value of the shim frame a C caller pushes (3.12+, pycore_frame.h).
const FRAME_OWNED_BY_CSTACK: u8 = 3;

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
    function: String,
    file: String,
    firstlineno: i32,
    linetable: Vec<u8>,
}

/// Decoded code objects by address, checked against their name/file/table pointers on every use.
#[derive(Default)]
pub struct CodeCache {
    map: HashMap<u64, CodeInfo>,
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
        let frame_read_len = [Some(l.frame_code), Some(l.frame_previous), Some(l.frame_instr), l.frame_owner]
            .iter()
            .flatten()
            .max()
            .copied()
            .unwrap()
            + 8;
        let code_read_len = [
            Some(l.code_filename),
            Some(l.code_name),
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

    /// The thread's stack, innermost first, and where the innermost frame stands (code, instruction).
    pub fn walk(&self, tstate: u64, cache: &mut CodeCache) -> Result<Walked, WalkError> {
        let l = self.layout;
        let mut out = Vec::new();
        let mut top = None;
        let mut frame = self.top_frame(tstate)?;
        let mut buf = vec![0u8; self.frame_read_len];
        while frame != 0 {
            if out.len() >= MAX_DEPTH {
                return Err(WalkError::Torn);
            }
            self.mem.read(frame, &mut buf)?;
            let code = u64_at(&buf, l.frame_code);
            let previous = u64_at(&buf, l.frame_previous);
            let skip = match l.frame_owner {
                Some(off) => l.version.1 >= 12 && buf[off as usize] == FRAME_OWNED_BY_CSTACK,
                None => false,
            };
            if !skip && code != 0 {
                let instr: i64 = if l.version.1 == 10 { i32_at(&buf, l.frame_instr) as i64 } else { u64_at(&buf, l.frame_instr) as i64 };
                match self.frame_at(code, instr, cache) {
                    Ok(Some(f)) => {
                        if top.is_none() {
                            top = Some((code, instr));
                        }
                        out.push(f)
                    }
                    Ok(None) => {}
                    Err(e) => return Err(e),
                }
            }
            if previous == frame {
                return Err(WalkError::Torn);
            }
            frame = previous;
        }
        Ok((out, top))
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

    /// Decodes one frame; `Ok(None)` for a 3.13 frame whose executable is not a code object.
    fn frame_at(&self, code: u64, instr: i64, cache: &mut CodeCache) -> Result<Option<Frame>, WalkError> {
        let l = self.layout;
        if let Some(info) = cache.map.get(&code) {
            if info.checked.elapsed() < RECHECK_CODE_AFTER {
                return Ok(Some(self.located(info, code, instr)));
            }
        }
        let mut head = vec![0u8; self.code_read_len];
        self.mem.read(code, &mut head)?;
        if let Some(ct) = self.code_type {
            if u64_at(&head, l.object_type) != ct {
                if l.version.1 >= 13 {
                    return Ok(None); // f_executable may legitimately be another object (e.g. None)
                }
                return Err(WalkError::Torn);
            }
        }
        let key = (u64_at(&head, l.code_filename), u64_at(&head, l.code_name), u64_at(&head, l.code_linetable));
        match cache.map.get_mut(&code) {
            Some(c) if c.key == key => c.checked = Instant::now(),
            _ => {
                let function = read_unicode(self.mem, l, key.1)?;
                let file = read_unicode(self.mem, l, key.0)?;
                let linetable = read_bytes(self.mem, l, key.2, MAX_LINETABLE)?;
                let firstlineno = i32_at(&head, l.code_firstlineno);
                cache.map.insert(code, CodeInfo { key, checked: Instant::now(), function, file, firstlineno, linetable });
            }
        }
        Ok(Some(self.located(cache.map.get(&code).unwrap(), code, instr)))
    }

    /// The frame for a decoded code object at an instruction position.
    fn located(&self, info: &CodeInfo, code: u64, instr: i64) -> Frame {
        let l = self.layout;
        let line = if l.version.1 == 10 {
            line_310(&info.linetable, info.firstlineno, instr.max(0) * 2)
        } else {
            let first = code as i64 + l.code_code_adaptive.unwrap() as i64;
            let index = (instr - first) / 2;
            if index < 0 {
                Some(info.firstlineno) // frame created, no instruction run yet
            } else {
                line_311(&info.linetable, info.firstlineno, index)
            }
        };
        Frame { function: info.function.clone(), file: info.file.clone(), line: line.unwrap_or(0) }
    }
}
