//! Symbols and sections of the ELF file that holds the interpreter (libpython or the python executable).

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

pub struct ElfInfo {
    pub path: String,
    /// Lowest PT_LOAD virtual address (page-aligned); the load bias is map start − this.
    pub first_load_vaddr: u64,
    pub is_pie_or_shared: bool,
    symbols: Vec<(String, u64, u64)>,
    pub pyruntime_section: Option<(u64, u64)>,
    /// `.rodata` contents, kept for version-string scans on interpreters without `Py_Version`.
    pub rodata: Vec<u8>,
}

/// The symbols gilty needs; the rest of a 7 MB symbol table is not kept.
const WANTED: &[&str] = &["_PyRuntime", "PyCode_Type", "Py_Version", "take_gil", "drop_gil"];

impl ElfInfo {
    pub fn read(path: &str) -> std::io::Result<ElfInfo> {
        let data = std::fs::read(path)?;
        let file = object::File::parse(&*data)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        let mut symbols = Vec::new();
        for sym in file.dynamic_symbols().chain(file.symbols()) {
            if let Ok(name) = sym.name() {
                if WANTED.contains(&name) && sym.address() != 0 {
                    symbols.push((name.to_owned(), sym.address(), sym.size()));
                }
            }
        }
        let first_load_vaddr = file
            .segments()
            .map(|s| s.address())
            .min()
            .map(|a| a & !0xfff)
            .unwrap_or(0);
        let pyruntime_section =
            file.section_by_name(".PyRuntime").map(|s| (s.address(), s.size()));
        let rodata = file
            .section_by_name(".rodata")
            .and_then(|s| s.data().ok())
            .map(|d| d.to_vec())
            .unwrap_or_default();
        let is_pie_or_shared = matches!(file.kind(), object::ObjectKind::Dynamic);
        Ok(ElfInfo { path: path.to_owned(), first_load_vaddr, is_pie_or_shared, symbols, pyruntime_section, rodata })
    }

    /// (address, size) of a symbol, as linked (add the load bias for the runtime address).
    pub fn symbol(&self, name: &str) -> Option<(u64, u64)> {
        self.symbols.iter().find(|(n, _, _)| n == name).map(|(_, a, s)| (*a, *s))
    }

    /// Finds a "3.X.Y" release string (PY_VERSION) in .rodata, for 3.10, which has no `Py_Version`.
    pub fn scan_version(&self) -> Option<(u8, u8, u8)> {
        let d = &self.rodata;
        let mut i = 0;
        while i + 6 < d.len() {
            // PY_VERSION sits as its own NUL-terminated literal: "\03.10.13\0".
            if d[i] == 0 && d[i + 1] == b'3' && d[i + 2] == b'.' {
                let end = d[i + 1..].iter().position(|&b| b == 0).map(|p| i + 1 + p);
                if let Some(end) = end {
                    if let Ok(s) = std::str::from_utf8(&d[i + 1..end]) {
                        if let Some(v) = parse_release(s) {
                            return Some(v);
                        }
                    }
                }
            }
            i += 1;
        }
        None
    }
}

/// Parses "3.10.13" (optionally followed by a suffix such as "+" or "rc1") into numbers.
pub fn parse_release(s: &str) -> Option<(u8, u8, u8)> {
    if s.len() > 12 {
        return None;
    }
    let mut parts = s.splitn(3, '.');
    let major: u8 = parts.next()?.parse().ok()?;
    let minor: u8 = parts.next()?.parse().ok()?;
    let rest = parts.next()?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let tail = &rest[digits.len()..];
    if digits.is_empty() || !(tail.is_empty() || tail == "+" || tail.starts_with('a') || tail.starts_with('b') || tail.starts_with("rc")) {
        return None;
    }
    Some((major, minor, digits.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings() {
        assert_eq!(parse_release("3.10.13"), Some((3, 10, 13)));
        assert_eq!(parse_release("3.11.2+"), Some((3, 11, 2)));
        assert_eq!(parse_release("3.13.0rc1"), Some((3, 13, 0)));
        assert_eq!(parse_release("3.x"), None);
        assert_eq!(parse_release("3.10.13 (main, Jan"), None);
    }
}
