//! Function symbols of one ELF file, looked up by address as linked (SVMA).
//!
//! From `.symtab` when the file has one, else `.dynsym`, plus the `.symtab` of a separate debug
//! file when one is installed (`debug_file.rs`). Sizes are the symbols' own; a symbol of size 0
//! reaches to the next one.

use object::{Object, ObjectSymbol, SymbolKind};

#[derive(Debug, Default)]
pub struct SymbolTable {
    /// (start, end, name), sorted by start, no two with the same start.
    entries: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    pub fn from_entries(mut raw: Vec<(u64, u64, String)>) -> SymbolTable {
        raw.retain(|(start, _, name)| *start != 0 && !name.is_empty());
        raw.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        // One symbol per address: the sized one (aliases such as `foo`/`__foo` share an address).
        raw.dedup_by(|later, kept| later.0 == kept.0);
        let n = raw.len();
        for i in 0..n {
            if raw[i].1 <= raw[i].0 {
                let next = if i + 1 < n {
                    raw[i + 1].0
                } else {
                    raw[i].0 + 1
                };
                raw[i].1 = next;
            }
        }
        SymbolTable { entries: raw }
    }

    /// Function symbols of `file`: `.symtab` when present, else `.dynsym`.
    pub fn of_file(file: &object::File) -> SymbolTable {
        let mut raw = functions(file.symbols());
        if raw.is_empty() {
            raw = functions(file.dynamic_symbols());
        }
        SymbolTable::from_entries(raw)
    }

    /// Adds the symbols of `other` (a debug file's) that this table lacks.
    pub fn extend(&mut self, other: SymbolTable) {
        let mut raw = std::mem::take(&mut self.entries);
        raw.extend(other.entries);
        *self = SymbolTable::from_entries(raw);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The function holding `svma` and the offset into it.
    pub fn lookup(&self, svma: u64) -> Option<(&str, u64)> {
        let i = self.entries.partition_point(|e| e.0 <= svma);
        let (start, end, name) = self.entries.get(i.checked_sub(1)?)?;
        (svma < *end).then(|| (name.as_str(), svma - start))
    }
}

fn functions<'d>(syms: impl Iterator<Item = object::Symbol<'d, 'd>>) -> Vec<(u64, u64, String)> {
    syms.filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .filter_map(|s| {
            Some((
                s.address(),
                s.address() + s.size(),
                s.name().ok()?.to_owned(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_sized_and_unsized_symbols() {
        let t = SymbolTable::from_entries(vec![
            (0x2000, 0x2010, "b".into()),
            (0x1000, 0x1100, "a".into()),
            (0x3000, 0x3000, "c_unsized".into()),
            (0x3800, 0x3810, "d".into()),
            (0x1000, 0x1000, "a_alias".into()),
        ]);
        assert_eq!(t.len(), 4);
        assert_eq!(t.lookup(0x1000), Some(("a", 0)));
        assert_eq!(t.lookup(0x10ff), Some(("a", 0xff)));
        assert_eq!(t.lookup(0x1100), None); // past a's size, before b
        assert_eq!(t.lookup(0x0fff), None);
        assert_eq!(t.lookup(0x3400), Some(("c_unsized", 0x400))); // reaches to d
        assert_eq!(t.lookup(0x3810), None);
    }

    #[test]
    fn reads_this_test_binary() {
        // The test executable itself has a `.symtab` (release profile keeps symbols).
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*exe).unwrap();
        let t = SymbolTable::of_file(&file);
        assert!(t.len() > 100, "only {} symbols", t.len());
    }
}
