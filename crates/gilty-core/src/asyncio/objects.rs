//! Reading one task: its fields (C `_asyncio.Task` through the generated struct offsets,
//! pure-Python `asyncio.Task` through its instance dict), and its coroutine chain from the task's
//! coroutine down through each awaited coroutine or generator to the innermost suspended frame.

use super::pages::AddrMap;
use crate::error::invalid;
use crate::interp::frames::{CodeCache, Frame, FrameWalker, WalkError};
use crate::interp::object_graph::Reader;
use crate::interp::pyobjects::{read_c_string, read_small_int};
use crate::process::memory::Memory;
use gilty_layouts::{AsyncLayout, Layout};
use std::cell::RefCell;
use std::io;

/// Deeper await chains are taken as memory that changed under us.
const MAX_AWAIT_DEPTH: usize = 256;
/// Longest callback list or gather child list read.
pub const MAX_LIST: u64 = 1 << 16;

/// What an object is, as far as reading tasks goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CTask,
    PyTask,
    CFuture,
    PyFuture,
    Coroutine,
    Generator,
    FutureIter,
    Method,
    BuiltinMethod,
    Function,
    Partial,
    Other,
}

impl Kind {
    pub fn is_task(self) -> bool {
        matches!(self, Kind::CTask | Kind::PyTask)
    }
    pub fn is_future(self) -> bool {
        matches!(
            self,
            Kind::CTask | Kind::PyTask | Kind::CFuture | Kind::PyFuture
        )
    }
}

/// The classes tasks and futures are recognised by (addresses of type objects in the target).
#[derive(Debug, Default, Clone, Copy)]
pub struct Classes {
    pub c_task: u64,
    pub py_task: u64,
    pub c_future: u64,
    pub py_future: u64,
    pub gathering_future: u64,
    /// `functools.partial` and where its `func` and `args` fields sit (from its member
    /// descriptors).
    pub partial: u64,
    pub partial_func: u64,
    pub partial_args: u64,
}

struct TypeInfo {
    name: String,
    /// The type and its `tp_base` chain.
    chain: Vec<u64>,
}

/// A task's own fields, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFields {
    pub kind: Kind,
    pub loop_addr: u64,
    /// 0 pending, 1 cancelled, 2 finished.
    pub state: i32,
    pub fut_waiter: u64,
    pub coro: u64,
    pub name: String,
    pub cancelling: bool,
}

/// One coroutine or generator of a chain: the object, its frame as decoded, and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainLink {
    pub object: u64,
    pub frame: Option<Frame>,
    pub running: bool,
}

/// A coroutine chain, outermost first, and the object the innermost link awaits (0 if none).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chain {
    pub links: Vec<ChainLink>,
    pub bottom: u64,
}

pub struct AsyncReader<'a> {
    pub mem: &'a dyn Memory,
    pub l: &'a Layout,
    pub a: &'a AsyncLayout,
    pub classes: Classes,
    walker: FrameWalker<'a>,
    codes: RefCell<CodeCache>,
    types: RefCell<AddrMap<TypeInfo>>,
}

impl<'a> AsyncReader<'a> {
    pub fn new(
        mem: &'a dyn Memory,
        l: &'a Layout,
        a: &'a AsyncLayout,
        classes: Classes,
        code_type: Option<u64>,
    ) -> Self {
        AsyncReader {
            mem,
            l,
            a,
            classes,
            walker: FrameWalker::new(mem, l, code_type),
            codes: RefCell::new(CodeCache::default()),
            types: RefCell::new(AddrMap::default()),
        }
    }

    pub fn graph(&self) -> Reader<'_> {
        Reader::new(self.mem, self.l)
    }

    pub fn ptr(&self, addr: u64) -> io::Result<u64> {
        self.mem.read_u64(addr)
    }

    pub fn type_of(&self, obj: u64) -> io::Result<u64> {
        if obj == 0 {
            return Err(invalid("NULL object"));
        }
        let tp = self.ptr(obj.wrapping_add(self.l.object_type))?;
        if tp == 0 {
            return Err(invalid("object without a type"));
        }
        Ok(tp)
    }

    /// `tp_name` and the `tp_base` chain of a type, read once per type.
    fn with_type<T>(&self, tp: u64, f: impl FnOnce(&TypeInfo) -> T) -> io::Result<T> {
        if let Some(info) = self.types.borrow().get(&tp) {
            return Ok(f(info));
        }
        let name_ptr = self.ptr(tp.wrapping_add(self.l.type_name))?;
        let name = read_c_string(self.mem, name_ptr, 256)?;
        let mut chain = vec![tp];
        let mut t = tp;
        for _ in 0..32 {
            t = self.ptr(t.wrapping_add(self.a.type_base))?;
            if t == 0 {
                break;
            }
            chain.push(t);
        }
        let info = TypeInfo { name, chain };
        let out = f(&info);
        self.types.borrow_mut().insert(tp, info);
        Ok(out)
    }

    pub fn type_name(&self, obj: u64) -> io::Result<String> {
        self.with_type(self.type_of(obj)?, |t| t.name.clone())
    }

    pub fn kind(&self, obj: u64) -> io::Result<Kind> {
        let c = self.classes;
        self.with_type(self.type_of(obj)?, |t| {
            let has = |x: u64| x != 0 && t.chain.contains(&x);
            if has(c.c_task) {
                Kind::CTask
            } else if has(c.py_task) {
                Kind::PyTask
            } else if has(c.c_future) {
                Kind::CFuture
            } else if has(c.py_future) {
                Kind::PyFuture
            } else if has(c.partial) && c.partial_args != 0 {
                Kind::Partial
            } else {
                match t.name.as_str() {
                    "coroutine" => Kind::Coroutine,
                    "generator" => Kind::Generator,
                    "_asyncio.FutureIter" => Kind::FutureIter,
                    "method" => Kind::Method,
                    "builtin_function_or_method" => Kind::BuiltinMethod,
                    "function" => Kind::Function,
                    _ => Kind::Other,
                }
            }
        })
    }

    /// The offset of a field a C type exposes as a member descriptor (`PyMemberDef.offset`), read
    /// from the target's type dict: exact for that build, whatever its struct looks like.
    pub fn member_offset(&self, tp: u64, name: &str) -> io::Result<Option<u64>> {
        let dict = self.ptr(tp + self.a.type_dict)?;
        if dict == 0 {
            return Ok(None);
        }
        let Some(descr) = self.graph().dict_get_str(dict, name)? else {
            return Ok(None);
        };
        if self.type_name(descr)? != "member_descriptor" {
            return Ok(None);
        }
        let def = self.ptr(descr + self.a.memberdescr_member)?;
        let off = self.mem.read_i64(def + self.a.memberdef_offset)?;
        Ok((16..=4096).contains(&off).then_some(off as u64))
    }

    pub fn is_gathering(&self, obj: u64) -> bool {
        let g = self.classes.gathering_future;
        g != 0
            && self
                .type_of(obj)
                .and_then(|tp| self.with_type(tp, |t| t.chain.contains(&g)))
                .unwrap_or(false)
    }

    fn i32_at(&self, addr: u64) -> io::Result<i32> {
        self.mem.read_i32(addr)
    }

    /// A task's name: a str, or (3.13 C tasks) the number of a `Task-N` name not yet formatted.
    fn name_of(&self, obj: u64) -> io::Result<String> {
        if obj == 0 {
            return Ok(String::new());
        }
        match self.graph().read_str(obj) {
            Ok(s) => Ok(s),
            Err(_) => Ok(format!("Task-{}", read_small_int(self.mem, self.l, obj)?)),
        }
    }

    /// The task's fields; `kind` must be a task kind.
    pub fn task_fields(&self, task: u64, kind: Kind) -> io::Result<TaskFields> {
        let a = self.a;
        if kind == Kind::CTask {
            let buf = self.mem.read_vec(task, a.task_size as usize)?;
            let w = |off: u64| {
                u64::from_le_bytes(buf[off as usize..off as usize + 8].try_into().unwrap())
            };
            let i = |off: u64| {
                i32::from_le_bytes(buf[off as usize..off as usize + 4].try_into().unwrap())
            };
            let state = i(a.future_state);
            if !(0..=2).contains(&state) {
                return Err(invalid("implausible future state"));
            }
            let cancelling = match (a.task_num_cancels_requested, a.task_must_cancel) {
                (Some(off), _) => i(off) > 0,
                (None, Some(off)) => i(off) != 0,
                _ => false,
            };
            return Ok(TaskFields {
                kind,
                loop_addr: w(a.future_loop),
                state,
                fut_waiter: w(a.task_fut_waiter),
                coro: w(a.task_coro),
                name: self.name_of(w(a.task_name))?,
                cancelling,
            });
        }
        // Pure-Python Task (asyncio/tasks.py, futures.py): attributes in the instance dict;
        // `_state` is left to the class default (PENDING) until the future completes.
        let g = self.graph();
        let attr = |n: &str| g.get_attr(task, n).map(|v| v.unwrap_or(0));
        let state = match attr("_state")? {
            0 => 0,
            s => match g.read_str(s)?.as_str() {
                "PENDING" => 0,
                "CANCELLED" => 1,
                "FINISHED" => 2,
                _ => return Err(invalid("unknown future state")),
            },
        };
        let none_or_int = |n: &str| -> io::Result<i64> {
            let v = attr(n)?;
            Ok(if v == 0 {
                0
            } else {
                read_small_int(self.mem, self.l, v).unwrap_or(0)
            })
        };
        let cancelling =
            none_or_int("_num_cancels_requested")? > 0 || none_or_int("_must_cancel")? != 0;
        let fut_waiter = attr("_fut_waiter")?;
        let fut_waiter = if fut_waiter != 0 && self.kind(fut_waiter)? == Kind::Other {
            0
        } else {
            fut_waiter
        };
        Ok(TaskFields {
            kind,
            loop_addr: attr("_loop")?,
            state,
            fut_waiter,
            coro: attr("_coro")?,
            name: self.name_of(attr("_name")?)?,
            cancelling,
        })
    }

    /// The callbacks registered on a future: `(callback, context)` pairs, callbacks only.
    pub fn callbacks(&self, fut: u64, kind: Kind) -> io::Result<Vec<u64>> {
        let mut out = Vec::new();
        let list = if matches!(kind, Kind::CTask | Kind::CFuture) {
            let cb0 = self.ptr(fut + self.a.future_callback0)?;
            if cb0 != 0 {
                out.push(cb0);
            }
            self.ptr(fut + self.a.future_callbacks)?
        } else {
            self.graph().get_attr(fut, "_callbacks")?.unwrap_or(0)
        };
        if list != 0 {
            for item in self.list_items(list)? {
                // Each entry is a (callback, context) tuple in every version.
                let cb = self.ptr(item + self.l.tuple_item)?;
                if cb != 0 {
                    out.push(cb);
                }
            }
        }
        Ok(out)
    }

    /// Items of a list object (None gives none).
    pub fn list_items(&self, list: u64) -> io::Result<Vec<u64>> {
        let tp_name = self.type_name(list)?;
        if tp_name == "NoneType" {
            return Ok(Vec::new());
        }
        if tp_name != "list" {
            return Err(invalid("expected a list"));
        }
        let n = self.mem.read_i64(list + self.l.varobject_size)?;
        if n < 0 || n as u64 > MAX_LIST {
            return Err(invalid("implausible list size"));
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let items = self.ptr(list + self.a.list_item)?;
        let raw = self.mem.read_vec(items, n as usize * 8)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .filter(|&p| p != 0)
            .collect())
    }

    /// Follows a task's coroutine through each awaited coroutine or generator.
    pub fn chain(&self, coro: u64) -> Result<Chain, WalkError> {
        let mut chain = Chain::default();
        let mut obj = coro;
        for _ in 0..MAX_AWAIT_DEPTH {
            if obj == 0 {
                return Ok(chain);
            }
            match self.kind(obj)? {
                Kind::Coroutine | Kind::Generator => {
                    let (link, next) = self.gen_link(obj)?;
                    let stop = link.running;
                    chain.links.push(link);
                    if stop {
                        return Ok(chain);
                    }
                    match next {
                        Some(n) => obj = n,
                        None => return Ok(chain),
                    }
                }
                Kind::FutureIter => {
                    chain.bottom = self.ptr(obj + self.a.futureiter_future)?;
                    return Ok(chain);
                }
                _ => {
                    chain.bottom = obj;
                    return Ok(chain);
                }
            }
        }
        Err(WalkError::Torn)
    }

    /// One coroutine/generator: its frame, whether it runs, and what it awaits if suspended in an
    /// `await` / `yield from` (the value on top of its stack, as CPython's `_PyGen_yf` finds it).
    fn gen_link(&self, gen: u64) -> Result<(ChainLink, Option<u64>), WalkError> {
        let a = self.a;
        let l = self.l;
        let (code, instr, state, yf) = if let Some(iframe_off) = a.gen_iframe {
            let state = self.mem.read_u8(gen + a.gen_frame_state.unwrap())? as i8 as i64;
            let frame = gen + iframe_off;
            let live = [
                Some(a.frame_state_created),
                Some(a.frame_state_suspended),
                a.frame_state_suspended_yield_from,
                a.frame_state_suspended_yield_from_locked,
                Some(a.frame_state_executing),
            ];
            if !live.contains(&Some(state)) {
                // completed or cleared: no frame
                return Ok((
                    ChainLink {
                        object: gen,
                        frame: None,
                        running: false,
                    },
                    None,
                ));
            }
            let code = l.frame_code_ptr(self.ptr(frame + l.frame_code)?);
            let instr = self.ptr(frame + l.frame_instr)? as i64;
            let mut yf = None;
            let suspended_in_await = match a.frame_state_suspended_yield_from {
                Some(s) => state == s || Some(state) == a.frame_state_suspended_yield_from_locked,
                None if state == a.frame_state_suspended => {
                    // 3.11/3.12: the instruction after the YIELD_VALUE is RESUME with oparg >= 2.
                    let next = self.mem.read_vec(instr as u64 + 2, 2)?;
                    let op = next[0] as u64;
                    (Some(op) == a.opcode_resume || Some(op) == a.opcode_resume_alt) && next[1] >= 2
                }
                None => false,
            };
            if suspended_in_await {
                let base = frame + l.frame_localsplus.unwrap();
                let tos = match a.iframe_stackpointer {
                    // 3.14+: a pointer one past TOS, inside the frame's own localsplus.
                    Some(off) => {
                        let sp = self.ptr(frame + off)?;
                        let depth = a.iframe_awaited_depth.unwrap_or(1);
                        if sp < base + 8 * depth || sp > base + (8 << 20) || sp % 8 != 0 {
                            return Err(WalkError::Torn);
                        }
                        sp - 8 * depth
                    }
                    None => {
                        let top = self.i32_at(frame + a.iframe_stacktop.unwrap())? as i64;
                        if !(1..=1 << 20).contains(&top) {
                            return Err(WalkError::Torn);
                        }
                        base + (top as u64 - 1) * 8
                    }
                };
                // A `_PyStackRef` on 3.14+: its tag bits cleared, as for `f_executable`.
                yf = Some(l.frame_code_ptr(self.ptr(tos)?));
            }
            (code, instr, state, yf)
        } else {
            // 3.10: a PyFrameObject of its own, NULL once the generator finished.
            let frame = self.ptr(gen + a.gen_frame.unwrap())?;
            if frame == 0 {
                return Ok((
                    ChainLink {
                        object: gen,
                        frame: None,
                        running: false,
                    },
                    None,
                ));
            }
            let code = self.ptr(frame + l.frame_code)?;
            let lasti = self.i32_at(frame + l.frame_instr)? as i64;
            let state = self.mem.read_u8(frame + l.frame_state.unwrap())? as i8 as i64;
            let mut yf = None;
            if state == a.frame_state_suspended && lasti >= 0 {
                let bytes = self.ptr(code + l.code_code.unwrap())?;
                let size = self.mem.read_i64(bytes + l.varobject_size)?;
                let at = (lasti + 1) * 2;
                if at < size
                    && Some(self.mem.read_u8(bytes + l.bytes_sval + at as u64)? as u64)
                        == a.opcode_yield_from
                {
                    let depth = self.i32_at(frame + a.frame_stackdepth.unwrap())? as i64;
                    if !(1..=1 << 20).contains(&depth) {
                        return Err(WalkError::Torn);
                    }
                    let stack = self.ptr(frame + a.frame_valuestack.unwrap())?;
                    yf = Some(self.ptr(stack + (depth as u64 - 1) * 8)?);
                }
            }
            (code, lasti, state, yf)
        };
        let running = state == a.frame_state_executing;
        let mut frame =
            self.walker
                .decode_frame(code, instr, &mut self.codes.borrow_mut(), self.mem)?;
        // 3.11+ frames carry co_qualname, the coroutine's __qualname__ unless someone renamed it;
        // 3.10 code objects have no qualified name, so the generator's own gi_qualname is read.
        if let (Some(f), None) = (frame.as_mut(), l.code_qualname) {
            f.function = self.graph().read_str(self.ptr(gen + a.gen_qualname)?)?;
        }
        Ok((
            ChainLink {
                object: gen,
                frame,
                running,
            },
            yf,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::Garbage;

    /// Garbage memory (random words, many of them pointers back into the buffer) must give errors
    /// or bounded results, never a panic, a hang or a huge allocation, on every version's layout.
    #[test]
    fn garbage_memory_is_bounded() {
        let mut garbage = Garbage::new(0x2545_f491_4f6c_dd1du64);
        const BASE: u64 = Garbage::BASE;
        const LEN: u64 = Garbage::LEN;
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            let Some(a) = gilty_layouts::asyncio_layout_for(major, minor) else {
                continue;
            }; // none yet for 3.14+
            for _ in 0..10 {
                let mem = garbage.buffer();
                let classes = Classes {
                    c_task: BASE + 0x100,
                    py_task: BASE + 0x200,
                    c_future: BASE + 0x300,
                    py_future: BASE + 0x400,
                    gathering_future: BASE + 0x500,
                    partial: BASE + 0x600,
                    partial_func: 16,
                    partial_args: 24,
                };
                let r = AsyncReader::new(&mem, l, a, classes, None);
                for _ in 0..200 {
                    let addr = BASE + garbage.next_word() % LEN / 8 * 8;
                    let _ = r.chain(addr);
                    let _ = r.task_fields(addr, Kind::CTask);
                    let _ = r.task_fields(addr, Kind::PyTask);
                    let _ = r.callbacks(addr, Kind::CFuture);
                    let _ = r.list_items(addr);
                    let _ = r.member_offset(addr, "args");
                }
            }
        }
    }
}
