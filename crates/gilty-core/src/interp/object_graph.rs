//! Following references between Python objects in the target: dict entries (combined and split
//! tables), instance attributes (`__dict__`, 3.11+ managed dicts and inline values), and module
//! globals via `sys.modules`. Every size read from the target is bounded, so torn or garbage memory
//! gives an error rather than a hang or a huge allocation.

use crate::error::invalid;
use crate::interp::pyobjects::read_unicode;
use crate::process::memory::Memory;
use gilty_layouts::Layout;
use std::io;

const PTR: u64 = 8;
/// Most entries read from one dict (sys.modules holds hundreds to a few thousand).
const MAX_DICT_ENTRIES: u64 = 1 << 15;
/// Largest `log2(dk_size)` accepted: USABLE_FRACTION(2**16) covers MAX_DICT_ENTRIES.
const MAX_LOG2_SIZE: u64 = 16;

// Type flags, Include/object.h.
/// 3.13+ `Py_TPFLAGS_INLINE_VALUES`.
const TPFLAGS_INLINE_VALUES: u64 = 1 << 2;
/// 3.11+ `Py_TPFLAGS_MANAGED_DICT`.
const TPFLAGS_MANAGED_DICT: u64 = 1 << 4;
pub const TPFLAGS_LONG_SUBCLASS: u64 = 1 << 24;
const TPFLAGS_UNICODE_SUBCLASS: u64 = 1 << 28;
const TPFLAGS_DICT_SUBCLASS: u64 = 1 << 29;

/// Looks up `module.name` through `sys.modules` of the interpreter state at `main_interp`; None
/// when the module is not imported or has no such global.
pub fn module_global_in(
    r: &Reader,
    main_interp: u64,
    module: &str,
    name: &str,
) -> io::Result<Option<u64>> {
    let modules = r.ptr(main_interp.wrapping_add(r.l.interp_modules))?;
    if modules == 0 {
        return Ok(None);
    }
    let Some(m) = r.dict_get_str(modules, module)? else {
        return Ok(None);
    };
    let md_dict = r.ptr(m.wrapping_add(r.l.module_dict))?;
    if md_dict == 0 {
        return Ok(None);
    }
    r.dict_get_str(md_dict, name)
}

pub struct Reader<'a> {
    pub mem: &'a dyn Memory,
    pub l: &'a Layout,
}

/// Where a table's values live when they are not in the key entries (split tables).
#[derive(Clone, Copy)]
struct SplitValues {
    /// Address of `values[0]`.
    array: u64,
    /// 3.13 `PyDictValues.capacity`: slots allocated; older versions size the array from the keys.
    capacity: Option<u64>,
}

impl<'a> Reader<'a> {
    pub fn new(mem: &'a dyn Memory, l: &'a Layout) -> Self {
        Reader { mem, l }
    }

    pub fn ptr(&self, addr: u64) -> io::Result<u64> {
        self.mem.read_u64(addr)
    }

    fn minor(&self) -> u8 {
        self.l.version.1
    }

    fn type_flags(&self, obj: u64) -> io::Result<(u64, u64)> {
        if obj == 0 {
            return Err(invalid("NULL object"));
        }
        let tp = self.ptr(obj.wrapping_add(self.l.object_type))?;
        if tp == 0 {
            return Err(invalid("object without a type"));
        }
        Ok((tp, self.ptr(tp.wrapping_add(self.l.type_flags))?))
    }

    pub fn has_flag(&self, obj: u64, flag: u64) -> io::Result<bool> {
        Ok(self.type_flags(obj)?.1 & flag != 0)
    }

    pub fn read_str(&self, obj: u64) -> io::Result<String> {
        if !self.has_flag(obj, TPFLAGS_UNICODE_SUBCLASS)? {
            return Err(invalid("expected a str"));
        }
        read_unicode(self.mem, self.l, obj)
    }

    /// The values array of a `PyDictValues *`. 3.13 (Include/internal/pycore_dict.h `struct
    /// _dictvalues`) puts `uint8_t capacity, size, embedded, valid` before `values[]`; 3.11/3.12
    /// point straight at `values[]` (their insertion-order bytes sit before the pointer).
    fn split_values(&self, values: u64) -> io::Result<SplitValues> {
        if self.minor() >= 13 {
            let capacity = self.mem.read_u8(values)? as u64;
            Ok(SplitValues {
                array: values.wrapping_add(PTR),
                capacity: Some(capacity),
            })
        } else {
            Ok(SplitValues {
                array: values,
                capacity: None,
            })
        }
    }

    /// `(key, value)` pairs of a dict object, skipping deleted and unset slots.
    /// PyDictObject (Include/cpython/dictobject.h): `ma_values` NULL = combined table.
    pub fn dict_items(&self, dict: u64) -> io::Result<Vec<(u64, u64)>> {
        if !self.has_flag(dict, TPFLAGS_DICT_SUBCLASS)? {
            return Err(invalid("expected a dict"));
        }
        // An empty dict may share the interpreter's static empty keys (3.11+ `Py_EMPTY_KEYS`, of
        // size 1): nothing to read (3.14's `asyncio.tasks._current_tasks` stays so beside
        // `_asyncio`).
        if self.mem.read_i64(dict.wrapping_add(self.l.dict_used))? == 0 {
            return Ok(Vec::new());
        }
        let keys = self.ptr(dict.wrapping_add(self.l.dict_keys))?;
        let values = self.ptr(dict.wrapping_add(self.l.dict_values))?;
        let split = if values == 0 {
            None
        } else {
            Some(self.split_values(values)?)
        };
        self.keys_items(keys, split)
    }

    /// Entries of a `PyDictKeysObject`.
    ///
    /// 3.10 (Objects/dict-common.h, not installed; reproduced in tools/gen_layouts.py): `Py_ssize_t
    /// dk_size`; indices are 1/2/4/8 bytes for dk_size <= 0xff/0xffff/0xffffffff/more; entries
    /// `PyDictKeyEntry {hash, key, value}` follow `dk_size * ixsize` index bytes.
    /// 3.11+ (Include/internal/pycore_dict.h): `uint8_t dk_log2_size, dk_log2_index_bytes,
    /// dk_kind`; entries start `1 << dk_log2_index_bytes` after `dk_indices`; `dk_kind` GENERAL (0)
    /// uses `PyDictKeyEntry {hash, key, value}`, UNICODE (1) and SPLIT (2) use `PyDictUnicodeEntry
    /// {key, value}`.
    fn keys_items(&self, keys: u64, split: Option<SplitValues>) -> io::Result<Vec<(u64, u64)>> {
        if keys == 0 {
            return Err(invalid("dict without keys"));
        }
        let l = self.l;
        let (log2_size, index_bytes, unicode) = match (l.dictkeys_kind, l.dictkeys_log2_index_bytes)
        {
            (Some(kind_off), Some(lib_off)) => {
                let log2 = self.mem.read_u8(keys.wrapping_add(l.dictkeys_size))? as u64;
                let log2_index_bytes = self.mem.read_u8(keys.wrapping_add(lib_off))? as u64;
                let kind = self.mem.read_u8(keys.wrapping_add(kind_off))?;
                let ixsize_log2 = index_width_log2(log2);
                if !(3..=MAX_LOG2_SIZE).contains(&log2)
                    || log2_index_bytes != log2 + ixsize_log2
                    || kind > 2
                {
                    return Err(invalid("implausible dict keys header"));
                }
                (log2, 1u64 << log2_index_bytes, kind != 0)
            }
            _ => {
                let size = self.ptr(keys.wrapping_add(l.dictkeys_size))?;
                if !size.is_power_of_two() || !(8..=(1 << MAX_LOG2_SIZE)).contains(&size) {
                    return Err(invalid("implausible dict size"));
                }
                let log2 = size.trailing_zeros() as u64;
                (log2, size << index_width_log2(log2), false)
            }
        };
        let nentries = self.mem.read_i64(keys.wrapping_add(l.dictkeys_nentries))?;
        // USABLE_FRACTION(n) = (n << 1) / 3 (Objects/dictobject.c).
        let usable = ((1u64 << log2_size) << 1) / 3;
        if nentries < 0 || nentries as u64 > usable || nentries as u64 > MAX_DICT_ENTRIES {
            return Err(invalid("implausible dict entry count"));
        }
        let mut n = nentries as u64;
        let entries = keys.wrapping_add(l.dictkeys_indices + index_bytes);
        let (esize, key_at, value_at) = if unicode { (16, 0, 8) } else { (24, 8, 16) };
        let raw = self.mem.read_vec(entries, (n * esize) as usize)?;
        let word =
            |buf: &[u8], off: u64| u64::from_le_bytes(buf[off as usize..][..8].try_into().unwrap());
        let split_raw = match split {
            Some(s) => {
                n = n.min(s.capacity.unwrap_or(n));
                Some(self.mem.read_vec(s.array, (n * PTR) as usize)?)
            }
            None => None,
        };
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let key = word(&raw, i * esize + key_at);
            let value = match &split_raw {
                Some(v) => word(v, i * PTR),
                None => word(&raw, i * esize + value_at),
            };
            if key != 0 && value != 0 {
                out.push((key, value));
            }
        }
        Ok(out)
    }

    /// The value stored under the str key `name`, comparing keys as text (not by hash).
    pub fn dict_get_str(&self, dict: u64, name: &str) -> io::Result<Option<u64>> {
        self.find_str(self.dict_items(dict)?, name)
    }

    fn find_str(&self, items: Vec<(u64, u64)>, name: &str) -> io::Result<Option<u64>> {
        for (key, value) in items {
            if matches!(self.read_str(key), Ok(s) if s == name) {
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    /// An instance attribute stored in the object's own attribute storage (not the type's).
    pub fn get_attr(&self, obj: u64, name: &str) -> io::Result<Option<u64>> {
        let (tp, flags) = self.type_flags(obj)?;
        let cached_keys = || self.ptr(tp.wrapping_add(self.l.heaptype_cached_keys));
        let minor = self.minor();
        let dict = if minor >= 13 && flags & TPFLAGS_INLINE_VALUES != 0 {
            // 3.13 Include/internal/pycore_object.h `_PyObject_InlineValues`: the values sit right
            // after the object (obj + tp_basicsize, which equals sizeof(PyObject) for such types);
            // used while `valid`, else the managed dict (Objects/object.c PyObject_GenericGetAttr).
            let basicsize = self.mem.read_i64(tp.wrapping_add(self.l.type_basicsize))?;
            if !(16..=4096).contains(&basicsize) {
                return Err(invalid("implausible tp_basicsize"));
            }
            let values = obj.wrapping_add(basicsize as u64);
            if self.mem.read_u8(values.wrapping_add(3))? != 0 {
                let items = self.keys_items(cached_keys()?, Some(self.split_values(values)?))?;
                return self.find_str(items, name);
            }
            self.ptr(obj.wrapping_sub(3 * PTR))?
        } else if minor >= 11 && flags & TPFLAGS_MANAGED_DICT != 0 {
            // Pre-header words before the object (Include/internal/pycore_object.h).
            let dict_or_values = self.ptr(obj.wrapping_sub(3 * PTR))?;
            let values = match minor {
                // 3.11 `_PyObject_ValuesPointer` = obj - 4 words, `_PyObject_ManagedDictPointer` =
                // obj - 3.
                11 => self.ptr(obj.wrapping_sub(4 * PTR))?,
                // 3.12 `PyDictOrValues` at obj - 3 words: low bit set = values, stored as values -
                // 1.
                12 if dict_or_values & 1 == 1 => dict_or_values.wrapping_add(1),
                // 3.13 `_PyObject_ManagedDictPointer` = obj - 3 words (MANAGED_DICT_OFFSET).
                _ => 0,
            };
            if values != 0 {
                let items = self.keys_items(cached_keys()?, Some(self.split_values(values)?))?;
                return self.find_str(items, name);
            }
            dict_or_values
        } else {
            // tp_dictoffset (Include/cpython/object.h); negative offsets count from the end of a
            // variable-size object, which Thread instances are not.
            let off = self.mem.read_i64(tp.wrapping_add(self.l.type_dictoffset))?;
            if off == 0 {
                return Ok(None);
            }
            if !(16..=4096).contains(&off) {
                return Err(invalid("unsupported tp_dictoffset"));
            }
            self.ptr(obj.wrapping_add(off as u64))?
        };
        if dict == 0 {
            return Ok(None);
        }
        self.dict_get_str(dict, name)
    }
}

/// log2 of the index width for a table of `1 << log2_size` slots: 1 byte up to 2**7 slots, 2 up to
/// 2**15, 4 up to 2**31, else 8 (pycore_dict.h `dk_indices` comment; 3.10 DK_IXSIZE).
fn index_width_log2(log2_size: u64) -> u64 {
    match log2_size {
        0..=7 => 0,
        8..=15 => 1,
        16..=31 => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::memory::Garbage;

    /// Garbage memory (random words, many of them pointers back into the buffer) must give errors
    /// or empty results, never a panic, a hang or a huge allocation.
    #[test]
    fn garbage_memory_is_bounded() {
        let mut garbage = Garbage::new(0x9e37_79b9_7f4a_7c15u64);
        const BASE: u64 = Garbage::BASE;
        const LEN: u64 = Garbage::LEN;
        for (major, minor) in gilty_layouts::SUPPORTED.iter().copied() {
            let l = gilty_layouts::layout_for(major, minor).unwrap();
            for _ in 0..20 {
                let mem = garbage.buffer();
                let r = Reader::new(&mem, l);
                for _ in 0..200 {
                    let addr = BASE + garbage.next_word() % LEN / 8 * 8;
                    let _ = r.dict_items(addr);
                    let _ = r.dict_get_str(addr, "threading");
                    let _ = r.get_attr(addr, "_name");
                }
            }
        }
    }
}
