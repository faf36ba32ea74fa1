//! One ELF file the target maps: its unwind sections for framehop and its function symbols.
//!
//! The file is mapped read-only once and shared by every process mapping it; framehop reads
//! `.eh_frame`, `.eh_frame_hdr`, `.debug_frame` and `.text` straight from the mapping (no copies).

use super::lines::{has_lines, LineIndex};
use super::symbols::SymbolTable;
use crate::process::elf::Mapped;
use object::{Object, ObjectSection, ObjectSegment};
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

/// A byte range of a mapped file, as framehop's section data.
#[derive(Clone)]
pub struct Slice {
    map: Arc<Mapped>,
    range: Range<usize>,
}

impl Deref for Slice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map.bytes()[self.range.clone()]
    }
}

/// Where a section lies as linked, and its bytes.
#[derive(Clone)]
pub struct Section {
    pub svma: Range<u64>,
    pub data: Slice,
}

pub struct ModuleFile {
    pub path: String,
    /// Executable `PT_LOAD` segments: (file offset, vaddr, file size).
    loads: Vec<(u64, u64, u64)>,
    pub text: Option<Section>,
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr: Option<Section>,
    pub debug_frame: Option<Section>,
    pub got: Option<Range<u64>>,
    pub symbols: SymbolTable,
    /// The separate debug file whose symbols were added, if one was found.
    pub debug_file: Option<String>,
    map: Arc<Mapped>,
    debug_roots: Vec<String>,
    /// Source lines, looked for at the first lookup (most modules of a process never need theirs).
    lines: OnceLock<LineIndex>,
}

fn section(map: &Arc<Mapped>, file: &object::File, name: &str) -> Option<Section> {
    let s = file.section_by_name(name)?;
    let (off, size) = s.file_range()?;
    let end = off.checked_add(size)? as usize;
    if end > map.bytes().len() {
        return None;
    }
    Some(Section {
        svma: s.address()..s.address() + s.size(),
        data: Slice {
            map: Arc::clone(map),
            range: off as usize..end,
        },
    })
}

impl ModuleFile {
    /// Reads `open_path` (how we reach the file: the target's path, through `/proc/PID/root` when
    /// the target is in another mount namespace); `path` is the name shown.
    pub fn load(
        open_path: &str,
        path: &str,
        debug_roots: &[String],
    ) -> std::io::Result<ModuleFile> {
        let map = Arc::new(Mapped::open(open_path)?);
        let file = object::File::parse(map.bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        // Executable segments only: the mappings unwound are the executable ones, and a mapping's
        // page-aligned offset can fall in the file range of the read-only segment before.
        let loads = file
            .segments()
            .filter(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .filter_map(|s| {
                let (off, size) = s.file_range();
                Some((off, s.address(), size)).filter(|_| size > 0)
            })
            .collect();
        let mut symbols = SymbolTable::of_file(&file);
        let mut debug_file = None;
        // A debug file adds the local functions a stripped file lost (only `.dynsym` left).
        if !file.symbols().any(|_| true) {
            if let Some(dpath) = gilty_trace::symbols::matching_debug_file(&file, path, debug_roots)
            {
                if let Ok(dmap) = Mapped::open(&dpath) {
                    if let Ok(dfile) = object::File::parse(dmap.bytes()) {
                        symbols.extend(SymbolTable::of_file(&dfile));
                        debug_file = Some(dpath);
                    }
                }
            }
        }
        Ok(ModuleFile {
            path: path.to_owned(),
            loads,
            text: section(&map, &file, ".text"),
            eh_frame: section(&map, &file, ".eh_frame"),
            eh_frame_hdr: section(&map, &file, ".eh_frame_hdr"),
            debug_frame: section(&map, &file, ".debug_frame"),
            got: file
                .section_by_name(".got")
                .map(|s| s.address()..s.address() + s.size()),
            symbols,
            debug_file,
            map,
            debug_roots: debug_roots.to_vec(),
            lines: OnceLock::new(),
        })
    }

    /// The source file and line of `svma`, where the file or its separate debug file has DWARF
    /// line tables.
    pub fn line_of(&self, svma: u64) -> Option<(String, u32)> {
        self.lines.get_or_init(|| self.line_index()).lookup(svma)
    }

    fn line_index(&self) -> LineIndex {
        let Ok(file) = object::File::parse(self.map.bytes()) else {
            return LineIndex::default();
        };
        if has_lines(&file) {
            return LineIndex::new(Arc::clone(&self.map));
        }
        let dpath = self.debug_file.clone().or_else(|| {
            gilty_trace::symbols::matching_debug_file(&file, &self.path, &self.debug_roots)
        });
        let Some(dmap) = dpath.and_then(|p| Mapped::open(&p).ok()) else {
            return LineIndex::default();
        };
        match object::File::parse(dmap.bytes()) {
            Ok(dfile) if has_lines(&dfile) => LineIndex::new(Arc::new(dmap)),
            _ => LineIndex::default(),
        }
    }

    /// The load bias of a mapping of this file at `start` from file offset `offset`: runtime
    /// address minus address as linked.
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        // The kernel maps from the page holding the segment's start.
        let &(off, vaddr, _) = self
            .loads
            .iter()
            .find(|&&(off, _, size)| offset >= off & !0xfff && offset < off + size)?;
        Some(start.wrapping_sub((vaddr & !0xfff) + (offset - (off & !0xfff))))
    }

    /// The framehop module of this file mapped at `avma` with `bias`.
    pub fn framehop_module(&self, avma: Range<u64>, bias: u64) -> framehop::Module<Slice> {
        let info = framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.as_ref().map(|s| s.svma.clone()),
            text: self.text.as_ref().map(|s| s.data.clone()),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|s| s.svma.clone()),
            eh_frame: self.eh_frame.as_ref().map(|s| s.data.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
            debug_frame: self.debug_frame.as_ref().map(|s| s.data.clone()),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        };
        framehop::Module::new(self.path.clone(), avma, bias, info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_libc_with_unwind_sections() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("libc mapped")
            .to_owned();
        let m = ModuleFile::load(&libc, &libc, &[String::new()]).unwrap();
        assert!(m.eh_frame.is_some() && m.eh_frame_hdr.is_some() && m.text.is_some());
        assert!(!m.symbols.is_empty());
    }
}
