//! A thread's frames with their arguments and local variables (`gilty dump --locals`), read from
//! outside: names from the code object, values from the frame's `localsplus` slots, each shown by
//! `object_repr`.
//!
//! Slots (3.11+ `co_localsplusnames`/`co_localspluskinds`; 3.10 `co_varnames` + `co_cellvars` +
//! `co_freevars`): arguments first (`co_argcount + co_kwonlyargcount`, then `*args`, `**kwargs`),
//! then the other locals, then cells. Free variables (the enclosing function's) are left out, as
//! are unbound slots and 3.12+ comprehension-hidden ones. A cell slot holds a cell once the
//! function has started (3.11+ MAKE_CELL); its contents are shown.

use crate::error::invalid;
use crate::interp::frames::{FrameWalker, WalkError, MAX_DEPTH};
use crate::interp::linetable::{position_311, Position};
use crate::interp::object_repr::{ObjectRepr, TypeCache};
use crate::interp::pyobjects::{read_bytes, read_unicode};
use crate::process::block_cache::BlockCache;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::collections::HashMap;
use std::io;

// Include/internal/pycore_code.h (3.11+); 3.10 slots get the same kinds from the tuple they come
// from.
const CO_FAST_HIDDEN: u8 = 0x10;
const CO_FAST_LOCAL: u8 = 0x20;
const CO_FAST_CELL: u8 = 0x40;
const CO_FAST_FREE: u8 = 0x80;
// co_flags, Include/cpython/code.h.
const CO_VARARGS: i32 = 0x4;
const CO_VARKEYWORDS: i32 = 0x8;
/// More slots than this is taken as a torn read (a function has at most a few hundred).
const MAX_SLOTS: usize = 1 << 14;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// An argument of the function (positional, keyword-only, `*args` or `**kwargs`).
    pub arg: bool,
    pub repr: String,
}

#[derive(Debug, Clone)]
pub struct FrameLocals {
    /// `co_name`, to match the frame with the stack read for the same thread.
    pub name: String,
    pub variables: Vec<Variable>,
    /// Why the variables could not be read (the frame is still listed).
    pub error: Option<String>,
    /// 3.11+: the line and column range of the instruction the frame stands on (`co_positions`);
    /// None on 3.10 (its line table has lines only), before the first instruction, or when the
    /// table could not be read.
    pub position: Option<Position>,
}

/// What to read for each frame besides its function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    pub variables: bool,
    pub positions: bool,
}

/// Every Python frame of the thread state at `tstate`, innermost first, with its variables. Frames
/// are the ones `FrameWalker::walk` reports (C-stack shims and 3.13 non-code executables skipped).
///
/// Reads go through one page cache per call: objects, code objects and frames cluster in pages, and
/// what one call reads is then close to one moment of the thread.
pub fn thread_locals(
    target: &dyn Memory,
    l: &Layout,
    code_type: Option<u64>,
    tstate: u64,
    types: &TypeCache,
    want: Want,
) -> Result<Vec<FrameLocals>, WalkError> {
    let walker = FrameWalker::new(target, l, code_type);
    let mut frame = walker.top_frame(tstate)?;
    let reads = BlockCache::new(target);
    let mem: &dyn Memory = &reads;
    let reprs = ObjectRepr::new(mem, l, types);
    let mut codes = CodeMemo::default();
    let mut out = Vec::new();
    let mut depth = 0;
    while frame != 0 {
        depth += 1;
        if depth > MAX_DEPTH {
            // As the stack walk does: the innermost MAX_DEPTH frames, the outer ones not read
            // (`matches_stack` pairs them with a stack cut there).
            break;
        }
        let code = l.frame_code_ptr(mem.read_u64(frame + l.frame_code)?);
        let previous = mem.read_u64(frame + l.frame_previous)?;
        let shim = l
            .frame_owner
            .map(|o| mem.read_u8(frame + o))
            .transpose()?
            .is_some_and(|o| l.is_interpreter_owner(o));
        let is_code = match code_type {
            Some(ct) if code != 0 => mem.read_u64(code + l.object_type)? == ct,
            _ => code != 0,
        };
        if !shim && code != 0 {
            if !is_code {
                if l.version.1 < 13 {
                    return Err(WalkError::Torn);
                }
            } else {
                out.push(frame_locals(mem, l, &reprs, &mut codes, frame, code, want));
            }
        }
        if previous == frame {
            return Err(WalkError::Torn);
        }
        frame = previous;
    }
    Ok(out)
}

/// What one read of a thread learnt of each code object: its name, and the position of each
/// instruction asked for. A recursion 100,000 frames deep is one code object at one instruction: read
/// and decoded once, not 100,000 times (15 s for `dump --format json` of such a thread before).
#[derive(Default)]
struct CodeMemo {
    names: HashMap<u64, String>,
    positions: HashMap<(u64, i64), Option<Position>>,
}

fn frame_locals(
    mem: &dyn Memory,
    l: &Layout,
    reprs: &ObjectRepr,
    codes: &mut CodeMemo,
    frame: u64,
    code: u64,
    want: Want,
) -> FrameLocals {
    let name = codes
        .names
        .entry(code)
        .or_insert_with(|| {
            mem.read_u64(code + l.code_name)
                .and_then(|p| read_unicode(mem, l, p))
                .unwrap_or_else(|_| "?".to_owned())
        })
        .clone();
    let position = if want.positions {
        position(mem, l, codes, frame, code).ok().flatten()
    } else {
        None
    };
    if !want.variables {
        return FrameLocals {
            name,
            variables: Vec::new(),
            error: None,
            position,
        };
    }
    match variables(mem, l, reprs, frame, code) {
        Ok(variables) => FrameLocals {
            name,
            variables,
            error: None,
            position,
        },
        Err(e) => FrameLocals {
            name,
            variables: Vec::new(),
            error: Some(e.to_string()),
            position,
        },
    }
}

/// Longest location table read (the same bound as the frame walk's).
const MAX_LINETABLE: usize = 1 << 20;

/// 3.11+: the position of the instruction the frame stands on (3.11/3.12 `prev_instr`, 3.13
/// `instr_ptr`, both pointers into `co_code_adaptive`; the same index the stack's line comes from).
fn position(
    mem: &dyn Memory,
    l: &Layout,
    codes: &mut CodeMemo,
    frame: u64,
    code: u64,
) -> io::Result<Option<Position>> {
    let Some(adaptive) = l.code_code_adaptive else {
        return Ok(None);
    };
    // Wrapping: on a torn or garbage frame either pointer may be anything.
    let instr = mem.read_u64(frame + l.frame_instr)? as i64;
    let index = instr.wrapping_sub(code.wrapping_add(adaptive) as i64) / 2;
    if index < 0 {
        return Ok(None); // created, no instruction run yet
    }
    if let Some(known) = codes.positions.get(&(code, index)) {
        return Ok(*known);
    }
    let found = position_of(mem, l, code, index)?;
    codes.positions.insert((code, index), found);
    Ok(found)
}

fn position_of(
    mem: &dyn Memory,
    l: &Layout,
    code: u64,
    index: i64,
) -> io::Result<Option<Position>> {
    let table = read_bytes(
        mem,
        l,
        mem.read_u64(code + l.code_linetable)?,
        MAX_LINETABLE,
    )?;
    let firstlineno = mem.read_i32(code + l.code_firstlineno)?;
    Ok(position_311(&table, firstlineno, index))
}

/// The names of a tuple of str.
fn str_tuple(mem: &dyn Memory, l: &Layout, tuple: u64) -> io::Result<Vec<String>> {
    if tuple == 0 {
        return Err(invalid("NULL name tuple"));
    }
    let n = mem.read_i64(tuple + l.varobject_size)?;
    if !(0..=MAX_SLOTS as i64).contains(&n) {
        return Err(invalid("implausible name tuple size"));
    }
    let raw = mem.read_vec(tuple + l.tuple_item, n as usize * 8)?;
    raw.chunks_exact(8)
        .map(|c| read_unicode(mem, l, u64::from_le_bytes(c.try_into().unwrap())))
        .collect()
}

/// (name, kind) of every `localsplus` slot of a code object.
fn slots(mem: &dyn Memory, l: &Layout, code: u64) -> io::Result<Vec<(String, u8)>> {
    if let (Some(names_off), Some(kinds_off), Some(n_off)) = (
        l.code_localsplusnames,
        l.code_localspluskinds,
        l.code_nlocalsplus,
    ) {
        let n = mem.read_i32(code + n_off)?;
        let names = str_tuple(mem, l, mem.read_u64(code + names_off)?)?;
        let kinds = read_bytes(mem, l, mem.read_u64(code + kinds_off)?, MAX_SLOTS)?;
        if n < 0 || names.len() != n as usize || kinds.len() != n as usize {
            return Err(invalid("code object's slot tables disagree"));
        }
        return Ok(names.into_iter().zip(kinds).collect());
    }
    // 3.10: f_localsplus = co_nlocals locals (co_varnames), then cells, then free variables.
    let (Some(var_off), Some(cell_off), Some(free_off)) =
        (l.code_varnames, l.code_cellvars, l.code_freevars)
    else {
        return Err(invalid("no slot names in this layout"));
    };
    let nlocals = mem.read_i32(code + l.code_nlocals)?;
    let varnames = str_tuple(mem, l, mem.read_u64(code + var_off)?)?;
    if nlocals < 0 || nlocals as usize > varnames.len() {
        return Err(invalid("implausible co_nlocals"));
    }
    let mut out: Vec<(String, u8)> = varnames
        .into_iter()
        .take(nlocals as usize)
        .map(|n| (n, CO_FAST_LOCAL))
        .collect();
    out.extend(
        str_tuple(mem, l, mem.read_u64(code + cell_off)?)?
            .into_iter()
            .map(|n| (n, CO_FAST_CELL)),
    );
    out.extend(
        str_tuple(mem, l, mem.read_u64(code + free_off)?)?
            .into_iter()
            .map(|n| (n, CO_FAST_FREE)),
    );
    Ok(out)
}

fn variables(
    mem: &dyn Memory,
    l: &Layout,
    reprs: &ObjectRepr,
    frame: u64,
    code: u64,
) -> io::Result<Vec<Variable>> {
    let slots = slots(mem, l, code)?;
    if slots.len() > MAX_SLOTS {
        return Err(invalid("too many slots"));
    }
    let argcount = mem.read_i32(code + l.code_argcount)?;
    let kwonly = mem.read_i32(code + l.code_kwonlyargcount)?;
    let flags = mem.read_i32(code + l.code_flags)?;
    if argcount < 0 || kwonly < 0 {
        return Err(invalid("negative argument count"));
    }
    let nargs = (argcount + kwonly) as usize
        + (flags & CO_VARARGS != 0) as usize
        + (flags & CO_VARKEYWORDS != 0) as usize;
    let localsplus = l
        .frame_localsplus
        .ok_or_else(|| invalid("no localsplus in this layout"))?;
    let raw = mem.read_vec(frame + localsplus, slots.len() * 8)?;
    let mut out = Vec::new();
    for (i, ((name, kind), value)) in slots.into_iter().zip(raw.chunks_exact(8)).enumerate() {
        // 3.14+: a slot is a `_PyStackRef`; its low bits tag a deferred reference, not the address.
        let mut value = l.frame_code_ptr(u64::from_le_bytes(value.try_into().unwrap()));
        if kind & CO_FAST_HIDDEN != 0
            || (kind & CO_FAST_FREE != 0 && kind & CO_FAST_LOCAL == 0)
            || value == 0
        {
            continue;
        }
        if kind & CO_FAST_CELL != 0 {
            // Before MAKE_CELL has run the slot still holds the plain argument value.
            match reprs.cell_contents(value) {
                Ok(Some(0)) => continue, // an empty cell: not assigned yet
                Ok(Some(inner)) => value = inner,
                _ => {}
            }
        }
        out.push(Variable {
            name,
            arg: i < nargs,
            repr: reprs.repr(value),
        });
    }
    Ok(out)
}

/// Whether locals read for a thread belong to the stack read for it a moment earlier: the same
/// number of frames, each with the same function (`co_name` is the last part of the stack's
/// qualified name).
pub fn matches_stack(stack: &[crate::interp::frames::Frame], locals: &[FrameLocals]) -> bool {
    let stack = cut_off(stack);
    stack.len() == locals.len()
        && stack.iter().zip(locals).all(|(f, l)| {
            (f.function == l.name || f.function.ends_with(&format!(".{}", l.name)))
                && l.position.is_none_or(|p| p.line == f.line)
        })
}

/// The stack without the marker of outer frames not read (`CUT_FRAMES`), which has no locals.
fn cut_off(stack: &[crate::interp::frames::Frame]) -> &[crate::interp::frames::Frame] {
    match stack.split_last() {
        Some((last, rest)) if last.function == crate::interp::frames::CUT_FRAMES => rest,
        _ => stack,
    }
}

/// Tries before a thread whose stack keeps moving is reported without locals.
const TRIES: usize = 5;

/// The variables of every frame of each thread in `stacks` (tid, stack as dumped), or why they
/// could not be read. A thread's locals are read after its stack; a thread that ran on in between
/// is read again, and after `TRIES` reads that never matched its stack it gets an error instead.
pub fn locals_for_threads(
    interp: &crate::interp::interpreter::Interpreter,
    stacks: &[(i32, &[crate::interp::frames::Frame])],
    want: Want,
) -> io::Result<std::collections::HashMap<i32, Result<Vec<FrameLocals>, String>>> {
    let mut out = std::collections::HashMap::new();
    if !want.variables && interp.version.1 < 11 {
        // 3.10's line table has lines only: every position is None, nothing to read again (and
        // no second read of a moving stack to fail to match the first).
        for &(tid, stack) in stacks {
            let frames = stack
                .iter()
                .map(|f| FrameLocals {
                    name: f.function.clone(),
                    variables: Vec::new(),
                    error: None,
                    position: None,
                })
                .collect();
            out.insert(tid, Ok(frames));
        }
        return Ok(out);
    }
    let (_, threads) = crate::interp::threads::python_threads_settled(
        interp,
        &mut crate::interp::threads::TidResolver::default(),
    )?;
    let types = TypeCache::default();
    for &(tid, stack) in stacks {
        let Some(t) = threads.iter().find(|t| t.tid == Some(tid)) else {
            continue;
        };
        let mut result = Err("the stack kept moving while its frames were read again".to_owned());
        for _ in 0..TRIES {
            match thread_locals(
                &interp.mem,
                &interp.layout,
                interp.code_type,
                t.tstate,
                &types,
                want,
            ) {
                Ok(mut frames) if matches_stack(stack, &frames) => {
                    if cut_off(stack).len() < stack.len() {
                        // One entry per frame of the stack, the marker's empty.
                        frames.push(FrameLocals {
                            name: crate::interp::frames::CUT_FRAMES.to_owned(),
                            variables: Vec::new(),
                            error: None,
                            position: None,
                        });
                    }
                    result = Ok(frames);
                    break;
                }
                Ok(_) | Err(WalkError::Torn) => {}
                Err(WalkError::Io(e)) => {
                    result = Err(format!("reading the frames failed: {e}"));
                    break;
                }
            }
        }
        out.insert(tid, result);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's frames read from garbage memory (random words, many pointing back into the
    /// buffer) end in locals or an error, never a panic, a hang or a huge allocation.
    #[test]
    fn garbage_frames_are_bounded() {
        use crate::process::memory::Garbage;
        let mut garbage = Garbage::new(0x2545_f491_4f6c_dd1du64);
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            for _ in 0..10 {
                let mem = garbage.buffer();
                let types = TypeCache::default();
                for _ in 0..200 {
                    let addr = Garbage::BASE + garbage.next_word() % Garbage::LEN / 8 * 8;
                    let _ = thread_locals(
                        &mem,
                        l,
                        None,
                        addr,
                        &types,
                        Want {
                            variables: true,
                            positions: true,
                        },
                    );
                }
            }
        }
    }

    /// A stack cut at `MAX_DEPTH` (its last entry the marker) matches the locals of the frames read;
    /// one not cut must match frame for frame.
    #[test]
    fn a_cut_stack_matches_the_locals_of_the_frames_read() {
        use crate::interp::frames::{Frame, CUT_FRAMES};
        let frame = |function: &str, line| Frame {
            function: function.to_owned(),
            file: "x.py".to_owned(),
            line,
        };
        let local = |name: &str| FrameLocals {
            name: name.to_owned(),
            variables: Vec::new(),
            error: None,
            position: None,
        };
        let cut = [frame("leaf", 3), frame("descend", 7), frame(CUT_FRAMES, -1)];
        assert!(matches_stack(&cut, &[local("leaf"), local("descend")]));
        assert!(!matches_stack(&cut[..2], &[local("leaf")]));
        assert!(!matches_stack(&cut, &[local("leaf"), local("other")]));
    }
}
