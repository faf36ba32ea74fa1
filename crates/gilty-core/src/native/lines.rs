//! Source file and line of an address as linked, from a file's DWARF line programs (`.debug_line`),
//! read with gimli.
//!
//! Where the file has `.debug_aranges` (address ranges per compilation unit), only the units
//! holding looked-up addresses are read, each once (a big library's whole line table takes tens of
//! MiB and a large part of a second; a dump needs a few units); without it, every unit at the first
//! lookup. Only what a lookup needs is kept: address ranges with an interned file name and a line.
//! Bounded: a `.debug_line` larger than `MAX_SECTION` is not read, and a table stops at `MAX_ROWS`
//! ranges (the addresses past it have no line). Bad DWARF (a truncated or garbage section) ends the
//! reading of its unit; what was read before stays, and nothing fails.

use crate::process::elf::Mapped;
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Largest `.debug_line` read (a big library's debug file may hold hundreds of MiB of DWARF).
const MAX_SECTION: u64 = 64 << 20;
/// Most address ranges kept per module (16 bytes each).
const MAX_ROWS: usize = 1 << 21;

#[derive(Debug, Default)]
pub struct LineTable {
    /// (start, file index, line), sorted by start; a range reaches to the next start, and an entry
    /// with line 0 ends the one before (the end of a sequence, or code without a line).
    rows: Vec<(u64, u32, u32)>,
    files: Vec<String>,
}

type Reader<'d> = gimli::EndianSlice<'d, gimli::RunTimeEndian>;

/// A section's bytes; empty when absent, compressed (not supported) or too big.
fn section_data<'d>(file: &object::File<'d>, name: &str) -> Cow<'d, [u8]> {
    let Some(s) = file.section_by_name(name) else {
        return Cow::Borrowed(&[]);
    };
    if s.size() > MAX_SECTION {
        return Cow::Borrowed(&[]);
    }
    match s.compressed_file_range() {
        Ok(r) if r.format == object::CompressionFormat::None => {
            s.data().map(Cow::Borrowed).unwrap_or(Cow::Borrowed(&[]))
        }
        _ => Cow::Borrowed(&[]),
    }
}

/// Whether `file` has line information to read.
pub fn has_lines(file: &object::File) -> bool {
    file.section_by_name(".debug_line")
        .is_some_and(|s| s.size() > 0)
        && file
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0)
}

/// The line tables of one ELF file, read as lookups need them.
#[derive(Default)]
pub struct LineIndex {
    map: Option<Arc<Mapped>>,
    /// (start, end, unit offset in `.debug_info`), sorted by start; empty without `.debug_aranges`.
    aranges: Vec<(u64, u64, usize)>,
    units: Mutex<HashMap<usize, Arc<LineTable>>>,
    /// Every unit's lines, without `.debug_aranges`.
    whole: OnceLock<LineTable>,
}

impl LineIndex {
    /// The index of the ELF file mapped at `map` (which must have line tables: `has_lines`).
    pub fn new(map: Arc<Mapped>) -> LineIndex {
        let aranges = object::File::parse(map.bytes())
            .ok()
            .and_then(|file| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_aranges(&file))).ok()
            })
            .unwrap_or_default();
        LineIndex {
            map: Some(map),
            aranges,
            ..Default::default()
        }
    }

    /// The source file and line of `svma`.
    pub fn lookup(&self, svma: u64) -> Option<(String, u32)> {
        let map = self.map.as_ref()?;
        let parse = |only: Option<usize>| match object::File::parse(map.bytes()) {
            Ok(file) => LineTable::of_file_units(&file, only),
            Err(_) => LineTable::default(),
        };
        if self.aranges.is_empty() {
            let (file, line) = self.whole.get_or_init(|| parse(None)).lookup(svma)?;
            return Some((file.to_owned(), line));
        }
        let i = self.aranges.partition_point(|r| r.0 <= svma);
        let &(_, end, unit) = self.aranges.get(i.checked_sub(1)?)?;
        if svma >= end {
            return None;
        }
        let table = {
            let mut units = self.units.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(
                units
                    .entry(unit)
                    .or_insert_with(|| Arc::new(parse(Some(unit)))),
            )
        };
        let (file, line) = table.lookup(svma)?;
        Some((file.to_owned(), line))
    }

    /// Units read so far (whole: every unit counts as one).
    pub fn units_read(&self) -> usize {
        self.units.lock().map(|u| u.len()).unwrap_or(0) + usize::from(self.whole.get().is_some())
    }
}

fn read_aranges(file: &object::File) -> Vec<(u64, u64, usize)> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let data = section_data(file, ".debug_aranges");
    let aranges = gimli::DebugAranges::new(&data, endian);
    let mut out = Vec::new();
    let mut headers = aranges.headers();
    while let Ok(Some(h)) = headers.next() {
        let unit = h.debug_info_offset().0;
        let mut entries = h.entries();
        while let Ok(Some(e)) = entries.next() {
            let r = e.range();
            if r.end > r.begin && r.begin != 0 {
                out.push((r.begin, r.end, unit));
            }
        }
    }
    out.sort_by_key(|r| r.0);
    out
}

impl LineTable {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The line table of `file` (empty without DWARF or when it cannot be read). Never panics on
    /// bad input: a panic in the reader is caught and gives an empty table.
    pub fn of_file(file: &object::File) -> LineTable {
        LineTable::of_file_units(file, None)
    }

    /// `of_file` for the one unit at `only` (an offset in `.debug_info`), or every unit.
    pub fn of_file_units(file: &object::File, only: Option<usize>) -> LineTable {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_table(file, only)))
            .unwrap_or_default()
    }

    /// The source file and line of `svma`.
    pub fn lookup(&self, svma: u64) -> Option<(&str, u32)> {
        let i = self.rows.partition_point(|r| r.0 <= svma);
        let &(_, file, line) = self.rows.get(i.checked_sub(1)?)?;
        if line == 0 {
            return None;
        }
        Some((self.files.get(file as usize)?.as_str(), line))
    }
}

fn read_table(file: &object::File, only: Option<usize>) -> LineTable {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let owned: gimli::DwarfSections<Cow<[u8]>> =
        gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, ()> {
            Ok(section_data(file, id.name()))
        })
        .unwrap_or_else(|_| unreachable!());
    let dwarf = owned.borrow(|s| Reader::new(s, endian));
    let mut table = LineTable::default();
    let mut interned: HashMap<String, u32> = HashMap::new();
    // (start, end, file, line) per row, then laid out as `rows`.
    let mut ranges: Vec<(u64, u64, u32, u32)> = Vec::new();
    let mut units = dwarf.units();
    let mut one = only.map(|off| {
        dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(off))
    });
    loop {
        let header = match one.take() {
            Some(Ok(h)) => h,
            Some(Err(_)) => break,
            None if only.is_some() => break,
            None => match units.next() {
                Ok(Some(h)) => h,
                _ => break,
            },
        };
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let comp_dir = unit.comp_dir.map(|d| d.to_string_lossy().into_owned());
        // File names by index, per unit: resolved once.
        let mut names: HashMap<u64, u32> = HashMap::new();
        let mut rows = program.rows();
        let mut prev: Option<(u64, u32, u32)> = None;
        // Stops at the end, or at bad DWARF: this unit stops there.
        while let Ok(Some((header, row))) = rows.next_row() {
            let addr = row.address();
            if let Some((start, f, l)) = prev.take() {
                if addr > start {
                    ranges.push((start, addr, f, l));
                }
            }
            if row.end_sequence() {
                continue;
            }
            let index = row.file_index();
            let file_id = match names.get(&index) {
                Some(&id) => id,
                None => {
                    let path =
                        file_path(&dwarf, &unit, header, row.file(header), comp_dir.as_deref());
                    let next = table.files.len() as u32;
                    let id = *interned.entry(path.clone()).or_insert_with(|| {
                        table.files.push(path);
                        next
                    });
                    names.insert(index, id);
                    id
                }
            };
            let line = row
                .line()
                .map(|l| l.get().min(u32::MAX as u64) as u32)
                .unwrap_or(0);
            prev = Some((addr, file_id, line));
            if ranges.len() >= MAX_ROWS {
                break;
            }
        }
        if ranges.len() >= MAX_ROWS {
            break;
        }
    }
    // Sequences may come in any order and a linker may leave overlapping ones (discarded code at
    // address 0): sorted by start, the first range at an address wins.
    ranges.sort_by_key(|r| r.0);
    let mut rows: Vec<(u64, u32, u32)> = Vec::with_capacity(ranges.len());
    let mut end = 0u64;
    for (start, stop, f, l) in ranges {
        if start < end {
            continue;
        }
        if start > end && !rows.is_empty() {
            rows.push((end, 0, 0)); // a gap: no line
        }
        // Neighbouring rows of one line are one range.
        if !(start == end && rows.last().is_some_and(|r| r.1 == f && r.2 == l)) {
            rows.push((start, f, l));
        }
        end = stop;
    }
    if !rows.is_empty() {
        rows.push((end, 0, 0));
    }
    rows.shrink_to_fit();
    table.rows = rows;
    table
}

/// A row's file as a path: absolute as written, else under its directory and the unit's
/// compilation directory.
fn file_path(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    header: &gimli::LineProgramHeader<Reader>,
    entry: Option<&gimli::FileEntry<Reader>>,
    comp_dir: Option<&str>,
) -> String {
    let Some(entry) = entry else {
        return "?".to_owned();
    };
    let text = |v: gimli::AttributeValue<Reader>| {
        dwarf
            .attr_string(unit, v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    let name = text(entry.path_name()).unwrap_or_else(|| "?".to_owned());
    if name.starts_with('/') {
        return name;
    }
    let dir = entry.directory(header).and_then(text).unwrap_or_default();
    let mut path = if dir.starts_with('/') {
        dir
    } else {
        match (comp_dir, dir.is_empty()) {
            (Some(c), true) => c.to_owned(),
            (Some(c), false) => format!("{c}/{dir}"),
            (None, _) => dir,
        }
    };
    if !path.is_empty() && !path.ends_with('/') {
        path.push('/');
    }
    // `dir/./name` as some builds write it: shown without the `./`.
    (path + &name).replace("/./", "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary_lines() {
        // The release profile keeps line tables (`debug = 1`): this very function has a line here.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*exe).unwrap();
        assert!(has_lines(&file));
        let t = LineTable::of_file(&file);
        assert!(t.len() > 1000, "only {} rows", t.len());
        let here = reads_this_test_binary_lines as *const () as usize as u64;
        // The test binary is position-independent: the function's address as linked is its runtime
        // address less the load bias, found from a symbol of the same name.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe_path = std::fs::read_link("/proc/self/exe").unwrap();
        let base = maps
            .lines()
            .find(|l| l.ends_with(exe_path.to_str().unwrap()))
            .and_then(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).ok())
            .unwrap();
        // The first mapping of a PIE is at file offset 0 and address as linked 0.
        let (path, line) = t.lookup(here - base).expect("a line for this function");
        assert!(path.ends_with("native/lines.rs"), "{path}");
        assert!(line > 150, "{line}");
    }

    #[test]
    fn garbage_dwarf_gives_no_lines_and_no_panic() {
        // An ELF file of our own making whose `.debug_info` and `.debug_line` are garbage or cut
        // short.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*exe).unwrap();
        let (off, size) = file
            .section_by_name(".debug_line")
            .unwrap()
            .compressed_file_range()
            .map(|r| (r.offset, r.compressed_size))
            .unwrap();
        let mut bad = exe.clone();
        let mut x = 0x9e37_79b9u32;
        for b in &mut bad[off as usize..(off + size.min(1 << 16)) as usize] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        let bad_file = object::File::parse(&*bad).unwrap();
        let t = LineTable::of_file(&bad_file);
        // The garbage part gives nothing; a lookup anywhere answers without failing.
        for a in [0u64, 0x1000, u64::MAX] {
            let _ = t.lookup(a);
        }
        assert!(t.len() < LineTable::of_file(&file).len());
    }

    #[test]
    fn index_reads_only_the_units_it_needs() {
        // A library built by gcc with -g has `.debug_aranges`: pyenv's libpython when installed.
        let lib = "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0";
        let Ok(map) = Mapped::open(lib) else {
            eprintln!("skipped: no {lib}");
            return;
        };
        let map = Arc::new(map);
        let file = object::File::parse(map.bytes()).unwrap();
        let index = LineIndex::new(Arc::clone(&map));
        if index.aranges.is_empty() {
            eprintln!("skipped: {lib} has no .debug_aranges");
            return;
        }
        // Inside the evaluation loop: in ceval.c, one unit read.
        let eval = file
            .symbols()
            .find(|s| object::ObjectSymbol::name(s) == Ok("_PyEval_EvalFrameDefault"))
            .map(|s| object::ObjectSymbol::address(&s))
            .expect("_PyEval_EvalFrameDefault");
        let (path, line) = index
            .lookup(eval + 16)
            .expect("a line in the evaluation loop");
        assert!(path.ends_with("ceval.c"), "{path}");
        assert!(line > 0);
        assert_eq!(index.units_read(), 1);
        // The same answer as the whole table.
        let whole = LineTable::of_file(&file);
        assert_eq!(
            whole.lookup(eval + 16).map(|(f, l)| (f.to_owned(), l)),
            Some((path, line))
        );
    }

    #[test]
    fn empty_table_answers_none() {
        let t = LineTable::default();
        assert!(t.is_empty());
        assert_eq!(t.lookup(0x1234), None);
    }
}
