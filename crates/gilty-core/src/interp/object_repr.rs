//! Short, bounded reprs of objects in the target, read from memory without calling into it.
//!
//! Builtins are shown by value: int, float, str, bytes, bool, None, and tuple, list, dict, set and
//! frozenset with their first items (and their length when not all are shown); so are NumPy's bool,
//! integer, float32 and float64 scalars (`numpy_scalar`), as py-spy shows them. Anything else is
//! `<TypeName at 0x...>`. A builtin is recognised by a static (not heap-allocated) type with the
//! builtin's `tp_name`, so a user class named `int` is not mistaken for one.
//!
//! Strings are quoted with `"` (as py-spy's dump does). A value that is cut ends in `…`; a cut
//! str/bytes/container is followed by its full length, e.g. `"abc…" (5000 chars)`, `[1, 2, …] (100
//! items)`.

use crate::error::invalid;
use crate::interp::object_graph::Reader;
use crate::interp::pyobjects::{read_c_string, read_unicode};
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::io;

/// Marker ending a value that was cut.
pub const CUT: &str = "…";
/// Characters of a str (or bytes) shown before the cut.
const MAX_STR: usize = 80;
/// Items of a container shown before the cut.
const MAX_ITEMS: usize = 6;
/// Containers nested deeper than this are shown by their length only.
const MAX_DEPTH: usize = 3;
/// Longest repr, in characters, of one variable.
const MAX_REPR: usize = 240;
/// Largest int shown in full, in 30-bit digits (about 300 decimal digits).
const MAX_INT_DIGITS: u64 = 33;

/// `Py_TPFLAGS_HEAPTYPE` (Include/object.h): classes created at run time, never a builtin.
const TPFLAGS_HEAPTYPE: u64 = 1 << 9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Bool,
    Float,
    Str,
    Bytes,
    NoneType,
    Tuple,
    List,
    Dict,
    Set,
    FrozenSet,
    Cell,
    /// A NumPy scalar read by value: its value follows the object header.
    Numpy(Scalar),
    Other,
}

/// The C type of a NumPy scalar's value (`obval`, right after the object header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

/// The scalar type of a NumPy `tp_name`, for the types read by value (py-spy's set, plus NumPy 1's
/// `bool_` and the `long long` pair, 64-bit on Linux); float16, longdouble and complex are not.
fn numpy_scalar(name: &str) -> Option<Scalar> {
    Some(match name.strip_prefix("numpy.")? {
        "bool" | "bool_" => Scalar::Bool,
        "int8" => Scalar::I8,
        "int16" => Scalar::I16,
        "int32" => Scalar::I32,
        "int64" | "longlong" => Scalar::I64,
        "uint8" => Scalar::U8,
        "uint16" => Scalar::U16,
        "uint32" => Scalar::U32,
        "uint64" | "ulonglong" => Scalar::U64,
        "float32" => Scalar::F32,
        "float64" => Scalar::F64,
        _ => return None,
    })
}

/// A NumPy scalar's value from the bytes after its header, as NumPy's `str()` prints it.
fn scalar_text(kind: Scalar, b: [u8; 8]) -> String {
    let int = |n: usize| -> i64 {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[..n]);
        // Sign-extend from n bytes.
        (i64::from_le_bytes(w) << (64 - 8 * n)) >> (64 - 8 * n)
    };
    let uint = |n: usize| -> u64 {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    match kind {
        Scalar::Bool => if b[0] != 0 { "True" } else { "False" }.to_owned(),
        Scalar::I8 => int(1).to_string(),
        Scalar::I16 => int(2).to_string(),
        Scalar::I32 => int(4).to_string(),
        Scalar::I64 => int(8).to_string(),
        Scalar::U8 => uint(1).to_string(),
        Scalar::U16 => uint(2).to_string(),
        Scalar::U32 => uint(4).to_string(),
        Scalar::U64 => uint(8).to_string(),
        // The shortest text that reads back as the same float32 (NumPy's `str`), not the double's.
        Scalar::F32 => {
            let v = f32::from_le_bytes(b[..4].try_into().unwrap());
            float_repr(format!("{v:e}").parse::<f64>().unwrap_or(v as f64))
        }
        Scalar::F64 => float_repr(f64::from_le_bytes(b)),
    }
}

/// Type objects already looked at, by address (kind and `tp_name`): shared by the reads of one
/// dump, as a type outlives the objects that point to it.
#[derive(Default)]
pub struct TypeCache(std::cell::RefCell<std::collections::HashMap<u64, (Kind, String)>>);

pub struct ObjectRepr<'a> {
    mem: &'a dyn Memory,
    l: &'a Layout,
    types: &'a TypeCache,
}

impl<'a> ObjectRepr<'a> {
    pub fn new(mem: &'a dyn Memory, l: &'a Layout, types: &'a TypeCache) -> Self {
        ObjectRepr { mem, l, types }
    }

    /// The repr of the object at `addr`, never longer than `MAX_REPR` characters; a read that fails
    /// part-way gives `<unreadable at 0x...>`.
    pub fn repr(&self, addr: u64) -> String {
        let mut out = match self.repr_at(addr, 0) {
            Ok(s) => s,
            Err(_) => format!("<unreadable at {addr:#x}>"),
        };
        if out.chars().count() > MAX_REPR {
            out = out.chars().take(MAX_REPR).collect::<String>() + CUT;
        }
        out
    }

    /// The value a cell holds (0 when empty), or None when `addr` is not a cell.
    pub fn cell_contents(&self, addr: u64) -> io::Result<Option<u64>> {
        let (kind, _) = self.kind_of(addr)?;
        if kind != Kind::Cell {
            return Ok(None);
        }
        Ok(Some(self.mem.read_u64(addr + self.l.cell_ref)?))
    }

    /// Whether the object is None.
    pub fn is_none(&self, addr: u64) -> io::Result<bool> {
        Ok(self.kind_of(addr)?.0 == Kind::NoneType)
    }

    /// `tp_name` of the object's type.
    pub fn type_name(&self, addr: u64) -> io::Result<String> {
        Ok(self.kind_of(addr)?.1)
    }

    /// `tp_name` of a type object.
    pub fn type_object_name(&self, tp: u64) -> io::Result<String> {
        if tp == 0 {
            return Err(invalid("NULL type"));
        }
        read_c_string(self.mem, self.mem.read_u64(tp + self.l.type_name)?, 200)
    }

    fn kind_of(&self, addr: u64) -> io::Result<(Kind, String)> {
        if addr == 0 || !addr.is_multiple_of(8) {
            return Err(invalid("bad object pointer"));
        }
        let tp = self.mem.read_u64(addr + self.l.object_type)?;
        if tp == 0 {
            return Err(invalid("object without a type"));
        }
        if let Some(k) = self.types.0.borrow().get(&tp) {
            return Ok(k.clone());
        }
        let flags = self.mem.read_u64(tp + self.l.type_flags)?;
        let name_ptr = self.mem.read_u64(tp + self.l.type_name)?;
        let name = read_c_string(self.mem, name_ptr, 200)?;
        let kind = if flags & TPFLAGS_HEAPTYPE != 0 {
            Kind::Other
        } else {
            match name.as_str() {
                "int" => Kind::Int,
                "bool" => Kind::Bool,
                "float" => Kind::Float,
                "str" => Kind::Str,
                "bytes" => Kind::Bytes,
                "NoneType" => Kind::NoneType,
                "tuple" => Kind::Tuple,
                "list" => Kind::List,
                "dict" => Kind::Dict,
                "set" => Kind::Set,
                "frozenset" => Kind::FrozenSet,
                "cell" => Kind::Cell,
                other => numpy_scalar(other).map_or(Kind::Other, Kind::Numpy),
            }
        };
        self.types.0.borrow_mut().insert(tp, (kind, name.clone()));
        Ok((kind, name))
    }

    fn repr_at(&self, addr: u64, depth: usize) -> io::Result<String> {
        let (kind, name) = self.kind_of(addr)?;
        let l = self.l;
        Ok(match kind {
            Kind::NoneType => "None".to_owned(),
            Kind::Bool => if self.int_digits(addr)?.2.iter().any(|&d| d != 0) {
                "True"
            } else {
                "False"
            }
            .to_owned(),
            Kind::Int => {
                let (negative, ndigits, digits) = self.int_digits(addr)?;
                match digits_to_decimal(&digits) {
                    _ if ndigits > MAX_INT_DIGITS => {
                        format!("<int of about {} bits at {addr:#x}>", ndigits * 30)
                    }
                    Some(s) if negative && s != "0" => format!("-{s}"),
                    Some(s) => s,
                    None => format!("<int at {addr:#x}>"),
                }
            }
            Kind::Float => {
                let bits = self.mem.read_u64(addr + l.float_value)?;
                float_repr(f64::from_bits(bits))
            }
            Kind::Str => self.str_repr(addr)?,
            Kind::Bytes => self.bytes_repr(addr)?,
            Kind::Tuple | Kind::List => {
                let len = self.mem.read_i64(addr + l.varobject_size)?;
                if !(0..=(1 << 40)).contains(&len) {
                    return Err(invalid("implausible length"));
                }
                let (open, close) = if kind == Kind::Tuple {
                    ("(", ")")
                } else {
                    ("[", "]")
                };
                let items_at = if kind == Kind::Tuple {
                    addr + l.tuple_item
                } else {
                    self.mem.read_u64(addr + l.list_items)?
                };
                let shown = (len as usize).min(MAX_ITEMS);
                let items = if depth >= MAX_DEPTH || shown == 0 {
                    Vec::new()
                } else {
                    let raw = self.mem.read_vec(items_at, shown * 8)?;
                    raw.chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                        .map(|p| self.item(p, depth))
                        .collect()
                };
                let trailing_comma = kind == Kind::Tuple && len == 1 && !items.is_empty();
                container(open, close, &items, len as u64, trailing_comma)
            }
            Kind::Dict => {
                let used = self.mem.read_i64(addr + l.dict_used)?;
                if !(0..=(1 << 40)).contains(&used) {
                    return Err(invalid("implausible dict size"));
                }
                let mut items = Vec::new();
                if depth < MAX_DEPTH && used > 0 {
                    // Large tables are refused by the reader's bounds: shown by their length only.
                    if let Ok(pairs) = Reader::new(self.mem, l).dict_items(addr) {
                        for (k, v) in pairs.into_iter().take(MAX_ITEMS) {
                            items.push(format!("{}: {}", self.item(k, depth), self.item(v, depth)));
                        }
                    }
                }
                container("{", "}", &items, used as u64, false)
            }
            Kind::Set | Kind::FrozenSet => {
                let used = self.mem.read_i64(addr + l.set_used)?;
                if !(0..=(1 << 40)).contains(&used) {
                    return Err(invalid("implausible set size"));
                }
                let items = if depth < MAX_DEPTH {
                    self.set_items(addr, used as u64)?
                } else {
                    Vec::new()
                };
                let items: Vec<String> = items.into_iter().map(|p| self.item(p, depth)).collect();
                let (open, close) = if kind == Kind::Set {
                    ("{", "}")
                } else {
                    ("frozenset({", "})")
                };
                if used == 0 {
                    return Ok(if kind == Kind::Set {
                        "set()".to_owned()
                    } else {
                        "frozenset()".to_owned()
                    });
                }
                container(open, close, &items, used as u64, false)
            }
            Kind::Numpy(scalar) => {
                // PyFloatObject is the object header and its double: the same offset as `obval`.
                let mut b = [0u8; 8];
                self.mem.read(addr + l.float_value, &mut b)?;
                scalar_text(scalar, b)
            }
            Kind::Cell | Kind::Other => format!("<{name} at {addr:#x}>"),
        })
    }

    fn item(&self, addr: u64, depth: usize) -> String {
        self.repr_at(addr, depth + 1)
            .unwrap_or_else(|_| format!("<unreadable at {addr:#x}>"))
    }

    /// Sign, digit count and 30-bit digits (least significant first) of an int or bool; no digits
    /// are read past `MAX_INT_DIGITS`.
    fn int_digits(&self, addr: u64) -> io::Result<(bool, u64, Vec<u32>)> {
        let l = self.l;
        let tag = self.mem.read_u64(addr + l.long_size)?;
        let (ndigits, negative) = if l.version.1 >= 12 {
            // lv_tag: digit count << 3 | sign (0 positive, 1 zero, 2 negative); Include/cpython/longintrepr.h.
            (tag >> 3, tag & 3 == 2)
        } else {
            let s = tag as i64;
            (s.unsigned_abs(), s < 0)
        };
        if ndigits > MAX_INT_DIGITS {
            return Ok((negative, ndigits, Vec::new()));
        }
        let raw = self
            .mem
            .read_vec(addr + l.long_digit, (ndigits * 4) as usize)?;
        Ok((
            negative,
            ndigits,
            raw.chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        ))
    }

    fn str_repr(&self, addr: u64) -> io::Result<String> {
        let len = self.mem.read_u64(addr + self.l.unicode_length)?;
        let s = read_unicode(self.mem, self.l, addr)?;
        let shown: String = s.chars().take(MAX_STR).collect();
        let mut out = String::from("\"");
        for c in shown.chars() {
            escape_char(c, &mut out);
        }
        if (len as usize) > MAX_STR {
            out.push_str(CUT);
            out.push('"');
            out.push_str(&format!(" ({len} chars)"));
        } else {
            out.push('"');
        }
        Ok(out)
    }

    fn bytes_repr(&self, addr: u64) -> io::Result<String> {
        let len = self.mem.read_i64(addr + self.l.varobject_size)?;
        if len < 0 {
            return Err(invalid("negative bytes length"));
        }
        let shown = (len as usize).min(MAX_STR);
        let raw = self.mem.read_vec(addr + self.l.bytes_sval, shown)?;
        let mut out = String::from("b\"");
        for &b in &raw {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                0x20..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\x{b:02x}")),
            }
        }
        if (len as usize) > shown {
            out.push_str(CUT);
            out.push('"');
            out.push_str(&format!(" ({len} bytes)"));
        } else {
            out.push('"');
        }
        Ok(out)
    }

    /// The first keys of a set's hash table (`setentry {key, hash}`), skipping empty slots and
    /// deleted ones: a deleted slot holds the shared dummy key, which is the one key seen twice
    /// (live keys are distinct). With at most one dummy slot it cannot be told from a live key, so
    /// a table with exactly one more key than `used` shows no items.
    fn set_items(&self, addr: u64, used: u64) -> io::Result<Vec<u64>> {
        let l = self.l;
        let mask = self.mem.read_u64(addr + l.set_mask)?;
        let table = self.mem.read_u64(addr + l.set_table)?;
        if mask >= (1 << 16) || !(mask + 1).is_power_of_two() || table == 0 {
            return Ok(Vec::new()); // large sets: length only
        }
        let raw = self
            .mem
            .read_vec(table, ((mask + 1) * l.setentry_size) as usize)?;
        let keys: Vec<u64> = raw
            .chunks_exact(l.setentry_size as usize)
            .map(|e| u64::from_le_bytes(e[l.setentry_key as usize..][..8].try_into().unwrap()))
            .filter(|&k| k != 0)
            .collect();
        let extra = keys.len() as u64 - used.min(keys.len() as u64);
        if extra == 0 {
            return Ok(keys.into_iter().take(MAX_ITEMS).collect());
        }
        let mut counts = std::collections::HashMap::new();
        for &k in &keys {
            *counts.entry(k).or_insert(0u64) += 1;
        }
        match counts.iter().find(|(_, &n)| n == extra) {
            Some((&dummy, _)) if extra > 1 => Ok(keys
                .into_iter()
                .filter(|&k| k != dummy)
                .take(MAX_ITEMS)
                .collect()),
            _ => Ok(Vec::new()),
        }
    }
}

fn container(open: &str, close: &str, items: &[String], len: u64, trailing_comma: bool) -> String {
    let mut out = String::from(open);
    out.push_str(&items.join(", "));
    if trailing_comma {
        out.push(',');
    }
    if (items.len() as u64) < len {
        if !items.is_empty() {
            out.push_str(", ");
        }
        out.push_str(CUT);
        out.push_str(close);
        out.push_str(&format!(" ({len} item{})", if len == 1 { "" } else { "s" }));
    } else {
        out.push_str(close);
    }
    out
}

fn escape_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push(c),
    }
}

/// Decimal text of an unsigned number given as 30-bit digits (least significant first); None when
/// it has more than `MAX_INT_DIGITS` digits.
fn digits_to_decimal(digits: &[u32]) -> Option<String> {
    if digits.len() as u64 > MAX_INT_DIGITS {
        return None;
    }
    // Repeated division by 10**9 of the big number held in base 2**30.
    let mut n: Vec<u64> = digits
        .iter()
        .rev()
        .map(|&d| (d & 0x3fff_ffff) as u64)
        .collect();
    let mut chunks = Vec::new();
    while n.iter().any(|&d| d != 0) {
        let mut rem = 0u64;
        for d in n.iter_mut() {
            let cur = (rem << 30) | *d;
            *d = cur / 1_000_000_000;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem);
        while n.first() == Some(&0) {
            n.remove(0);
        }
    }
    if chunks.is_empty() {
        return Some("0".to_owned());
    }
    let mut out = chunks.last().unwrap().to_string();
    for c in chunks.iter().rev().skip(1) {
        out.push_str(&format!("{c:09}"));
    }
    Some(out)
}

/// Python's `repr(float)`: the shortest text that reads back to the same value, in positional
/// notation for exponents -4..16 and scientific notation otherwise (Python/pystrtod.c, 'r' mode).
pub fn float_repr(v: f64) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // `{:e}` gives the shortest round-trip digits: "3.1415e0", "-1e-7".
    let sci = format!("{v:e}");
    let (mant, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    let (sign, mant) = mant
        .strip_prefix('-')
        .map(|m| ("-", m))
        .unwrap_or(("", mant));
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { "-" } else { "+" },
            exp.abs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_as_python_prints_them() {
        for (v, want) in [
            (2.5015, "2.5015"),
            (1.0, "1.0"),
            (-0.5, "-0.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e16, "1e+16"),
            (123456789012345.0, "123456789012345.0"),
            (1.5e300, "1.5e+300"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(float_repr(v), want, "{v:?}");
        }
    }

    #[test]
    fn numpy_scalars_from_their_value_bytes() {
        let le = |v: u64| v.to_le_bytes();
        assert_eq!(scalar_text(Scalar::I8, le(0xfd)), "-3");
        assert_eq!(scalar_text(Scalar::U8, le(0xfd)), "253");
        assert_eq!(scalar_text(Scalar::I64, le((-44i64) as u64)), "-44");
        assert_eq!(
            scalar_text(Scalar::U64, le(u64::MAX)),
            "18446744073709551615"
        );
        assert_eq!(scalar_text(Scalar::I16, le(0xdead_002a)), "42"); // bytes past the value ignored
        assert_eq!(scalar_text(Scalar::Bool, le(1)), "True");
        assert_eq!(scalar_text(Scalar::F32, le(0.7f32.to_bits() as u64)), "0.7");
        assert_eq!(scalar_text(Scalar::F32, le(2.0f32.to_bits() as u64)), "2.0");
        assert_eq!(scalar_text(Scalar::F64, le(0.7f64.to_bits())), "0.7");
        assert_eq!(numpy_scalar("numpy.bool_"), Some(Scalar::Bool));
        assert_eq!(
            (numpy_scalar("numpy.float16"), numpy_scalar("int8")),
            (None, None)
        );
    }

    #[test]
    fn ints_from_30_bit_digits() {
        // 123456789123456789 = d1 * 2**30 + d0
        let n: u128 = 123456789123456789;
        let d = [(n & 0x3fff_ffff) as u32, (n >> 30) as u32];
        assert_eq!(digits_to_decimal(&d).unwrap(), "123456789123456789");
        assert_eq!(digits_to_decimal(&[]).unwrap(), "0");
        let big: u128 = (1u128 << 89) + 12345;
        let d = [
            (big & 0x3fff_ffff) as u32,
            ((big >> 30) & 0x3fff_ffff) as u32,
            (big >> 60) as u32,
        ];
        assert_eq!(digits_to_decimal(&d).unwrap(), big.to_string());
    }

    /// Garbage memory (random words, many pointing back into the buffer) gives bounded reprs or
    /// `<unreadable ...>`, never a panic, a hang or a huge allocation (whole frames: locals.rs).
    #[test]
    fn garbage_memory_is_bounded() {
        use crate::process::memory::Garbage;
        let mut garbage = Garbage::new(0x2545_f491_4f6c_dd1du64);
        const BASE: u64 = Garbage::BASE;
        const LEN: u64 = Garbage::LEN;
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            for _ in 0..10 {
                let mem = garbage.buffer();
                let types = TypeCache::default();
                let reprs = ObjectRepr::new(&mem, l, &types);
                for _ in 0..200 {
                    let addr = BASE + garbage.next_word() % LEN / 8 * 8;
                    assert!(reprs.repr(addr).chars().count() <= MAX_REPR + 1);
                }
            }
        }
    }

    #[test]
    fn cut_containers_say_their_length() {
        let items = vec!["1".to_owned(), "2".to_owned()];
        assert_eq!(container("[", "]", &items, 2, false), "[1, 2]");
        assert_eq!(
            container("[", "]", &items, 100, false),
            "[1, 2, …] (100 items)"
        );
        assert_eq!(container("(", ")", &items[..1], 1, true), "(1,)");
        assert_eq!(container("{", "}", &[], 1, false), "{…} (1 item)");
    }
}
