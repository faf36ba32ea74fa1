//! Decoding a few CPython object kinds from raw target memory: str, bytes, int.

use crate::error::invalid;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::io;

/// Longest string decoded; longer names are cut (they are file paths or function names).
const MAX_STR_CHARS: u64 = 4096;

/// Reads a compact `str` object (every identifier and code-object name is compact).
pub fn read_unicode(mem: &dyn Memory, l: &Layout, addr: u64) -> io::Result<String> {
    if addr == 0 {
        return Err(invalid("NULL str"));
    }
    let header = mem.read_vec(addr, l.unicode_compact_size as usize)?;
    let length = u64::from_le_bytes(header[l.unicode_length as usize..][..8].try_into().unwrap());
    let state = u32::from_le_bytes(header[l.unicode_state as usize..][..4].try_into().unwrap());
    let kind = (state >> 2) & 7;
    let compact = (state >> 5) & 1 == 1;
    let ascii = (state >> 6) & 1 == 1;
    if !compact || !matches!(kind, 1 | 2 | 4) || length > (1 << 20) {
        return Err(invalid("not a compact str"));
    }
    let n = length.min(MAX_STR_CHARS);
    let data = if ascii {
        addr + l.unicode_ascii_size
    } else {
        addr + l.unicode_compact_size
    };
    let raw = mem.read_vec(data, (n * kind as u64) as usize)?;
    let s = match kind {
        1 if ascii => String::from_utf8(raw).map_err(|_| invalid("non-ASCII in ASCII str"))?,
        1 => raw.iter().map(|&b| b as char).collect(),
        2 => {
            let units: Vec<u16> = raw
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16_lossy(&units)
        }
        _ => raw
            .chunks_exact(4)
            .map(|c| {
                char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('\u{fffd}')
            })
            .collect(),
    };
    Ok(s)
}

/// Reads a `bytes` object's contents (at most `max` bytes).
pub fn read_bytes(mem: &dyn Memory, l: &Layout, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(invalid("NULL bytes"));
    }
    let size = mem.read_i64(addr + l.varobject_size)?;
    if size < 0 || size as usize > max {
        return Err(invalid("bytes size out of range"));
    }
    mem.read_vec(addr + l.bytes_sval, size as usize)
}

/// Reads a small `int` (one or two 30-bit digits) as i64; enough for thread idents and counters.
pub fn read_small_int(mem: &dyn Memory, l: &Layout, addr: u64) -> io::Result<i64> {
    let tag = mem.read_u64(addr + l.long_size)?;
    let (ndigits, negative) = if l.version.1 >= 12 {
        // lv_tag: digit count << 3 | sign bits (0 positive, 1 zero, 2 negative).
        (tag >> 3, tag & 3 == 2)
    } else {
        let s = tag as i64;
        (s.unsigned_abs(), s < 0)
    };
    if ndigits > 3 {
        return Err(invalid("int too large"));
    }
    let mut value: i64 = 0;
    for i in (0..ndigits).rev() {
        let d = mem.read_u32(addr + l.long_digit + 4 * i)? as i64;
        value = (value << 30) | d;
    }
    Ok(if negative { -value } else { value })
}

/// Reads a NUL-terminated UTF-8 C string (such as `tp_name`) of at most `max` bytes. Reads stop at
/// page ends so that a short string near the end of a mapping does not fail the read.
pub fn read_c_string(mem: &dyn Memory, addr: u64, max: usize) -> io::Result<String> {
    const PAGE: u64 = 4096;
    if addr == 0 {
        return Err(invalid("NULL char *"));
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let chunk = ((PAGE - at % PAGE) as usize).min(max - out.len()).min(256);
        let bytes = mem.read_vec(at, chunk)?;
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            out.extend_from_slice(&bytes[..nul]);
            return String::from_utf8(out).map_err(|_| invalid("C string is not UTF-8"));
        }
        out.extend_from_slice(&bytes);
        at += chunk as u64;
    }
    Err(invalid("C string too long"))
}
