//! Reading one code object's identity and adaptive bytecode from the target.

use super::decode::{decode, Instruction};
use crate::error::invalid;
use crate::interp::linetable::line_311;
use crate::interp::pyobjects::{read_bytes, read_unicode};
use crate::process::memory::Memory;
use gilty_layouts::opcodes::OpcodeTable;
use gilty_layouts::Layout;
use std::io;

/// Larger code objects are taken as a misread (CPython functions stay far below this).
const MAX_CODE_UNITS: i64 = 1 << 20;
const MAX_LINETABLE: usize = 1 << 20;

/// What stays fixed for a code object's life: names, place, line table, size.
#[derive(Debug, Clone)]
pub struct CodeIdentity {
    pub address: u64,
    pub qualname: String,
    pub filename: String,
    pub firstlineno: i32,
    pub linetable: Vec<u8>,
    /// Length of `co_code_adaptive` in code units (`Py_SIZE(code)`).
    pub units: usize,
    /// Pointers that must read the same for the address to still hold this code object.
    key: (u64, u64, u64),
}

impl CodeIdentity {
    /// Source line of the instruction at `unit`.
    pub fn line_of(&self, unit: usize) -> Option<i32> {
        line_311(&self.linetable, self.firstlineno, unit as i64)
    }
}

fn u64_at(b: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(b[off as usize..off as usize + 8].try_into().unwrap())
}

/// Reads the header of the code object at `addr`; `code_type` (PyCode_Type) guards against a
/// freed or foreign address.
pub fn read_identity(
    mem: &dyn Memory,
    l: &Layout,
    code_type: Option<u64>,
    addr: u64,
) -> io::Result<CodeIdentity> {
    let adaptive = l
        .code_code_adaptive
        .ok_or_else(|| invalid("no adaptive bytecode before 3.11"))?;
    let head = mem.read_vec(addr, adaptive as usize)?;
    if let Some(t) = code_type {
        if u64_at(&head, l.object_type) != t {
            return Err(invalid("not a code object"));
        }
    }
    let units = u64_at(&head, l.varobject_size) as i64;
    if !(0..=MAX_CODE_UNITS).contains(&units) {
        return Err(invalid("code size out of range"));
    }
    let key = (
        u64_at(&head, l.code_filename),
        u64_at(&head, l.code_qualname.unwrap_or(l.code_name)),
        u64_at(&head, l.code_linetable),
    );
    let firstlineno =
        i32::from_le_bytes(head[l.code_firstlineno as usize..][..4].try_into().unwrap());
    Ok(CodeIdentity {
        address: addr,
        qualname: read_unicode(mem, l, key.1)?,
        filename: read_unicode(mem, l, key.0)?,
        firstlineno,
        linetable: read_bytes(mem, l, key.2, MAX_LINETABLE)?,
        units: units as usize,
        key,
    })
}

/// The raw `co_code_adaptive` bytes as they are now, read together with the header in one read, or
/// None when the header's name/file/table pointers no longer match (the code object was freed and
/// the address reused): one syscall per code object per read pass.
pub fn read_adaptive_checked(
    mem: &dyn Memory,
    l: &Layout,
    id: &CodeIdentity,
) -> io::Result<Option<Vec<u8>>> {
    let off = l
        .code_code_adaptive
        .ok_or_else(|| invalid("no adaptive bytecode before 3.11"))? as usize;
    let mut buf = mem.read_vec(id.address, off + id.units * 2)?;
    let key = (
        u64_at(&buf, l.code_filename),
        u64_at(&buf, l.code_qualname.unwrap_or(l.code_name)),
        u64_at(&buf, l.code_linetable),
    );
    if key != id.key || u64_at(&buf, l.varobject_size) as usize != id.units {
        return Ok(None);
    }
    Ok(Some(buf.split_off(off)))
}

/// The raw `co_code_adaptive` bytes, as they are now.
pub fn read_adaptive(mem: &dyn Memory, l: &Layout, id: &CodeIdentity) -> io::Result<Vec<u8>> {
    let off = l
        .code_code_adaptive
        .ok_or_else(|| invalid("no adaptive bytecode before 3.11"))?;
    mem.read_vec(id.address + off, id.units * 2)
}

/// Reads and decodes a code object's instructions now.
pub fn read_instructions(
    mem: &dyn Memory,
    l: &Layout,
    t: &OpcodeTable,
    id: &CodeIdentity,
) -> io::Result<Vec<Instruction>> {
    Ok(decode(t, &read_adaptive(mem, l, id)?))
}
