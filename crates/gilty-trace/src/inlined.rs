//! Where a function was inlined: the entry address of every `DW_TAG_inlined_subroutine` instance of
//! it, from the DWARF of the mapped file or of its separate debug file.
//!
//! An LTO+PGO build (Debian's 3.14/3.15) keeps an out-of-line copy of `drop_gil` and also inlines
//! it into `PyEval_SaveThread`, the eval breaker's slow path and a few others: a uprobe on the
//! symbol alone misses every release made by a blocking call. The inlined copies have no symbol and
//! no return, only an entry pc (`DW_AT_entry_pc`, else `DW_AT_low_pc`, else the first of
//! `DW_AT_ranges`). Names are found through `DW_AT_abstract_origin` / `DW_AT_specification` chains
//! (LTO units refer to the early debug info of another unit). Debug files keep their DWARF
//! zlib-compressed (`SHF_COMPRESSED`).

use std::borrow::Cow;
use std::collections::HashMap;

use object::{Object, ObjectSection};

use crate::error::TraceError;
use crate::symbols::{self, MappedFile, ProbeTarget};

/// Largest uncompressed DWARF section read (3.15's `.debug_info` is ~60 MiB).
const MAX_SECTION: u64 = 512 << 20;
/// Origin chains are short (inlined copy → concrete or early DIE → abstract DIE); a loop ends here.
const MAX_CHAIN: usize = 8;

/// One inlined copy of a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedSite {
    /// The function that was inlined (one of the names asked for).
    pub function: String,
    /// The out-of-line function it sits in (`PyEval_SaveThread`), "?" when unnamed.
    pub caller: String,
    /// Its entry pc as linked.
    pub vaddr: u64,
    pub target: ProbeTarget,
}

/// The inlined copies of each of `functions` in the file `path_in_target` as mapped by `pid`, from
/// its DWARF or its separate debug file's. Err when neither has DWARF (nothing can be said about
/// inlining).
pub fn inlined_sites(
    pid: i32,
    path_in_target: &str,
    functions: &[&str],
) -> Result<InlinedReport, TraceError> {
    let roots = vec![format!("/proc/{pid}/root"), String::new()];
    let open_path = symbols::openable_path(pid, path_in_target)?;
    let map = MappedFile::open(&open_path).map_err(|e| {
        TraceError::TargetGone(format!("cannot read {path_in_target} ({open_path}): {e}"))
    })?;
    let file = object::File::parse(map.bytes()).map_err(|e| {
        TraceError::Io(format!(
            "{path_in_target}: not an ELF file we can read: {e}"
        ))
    })?;
    let no_dwarf = |what: String| TraceError::SymbolNotFound {
        symbol: functions.join("/"),
        path: path_in_target.to_owned(),
        hint: format!("no DWARF to tell where it was inlined: {what}"),
    };
    let (sites, from) = if has_dwarf(&file) {
        (read_sites(&file, map.bytes(), functions)?, None)
    } else {
        let mut found = None;
        for cand in symbols::debug_candidates(&file, path_in_target, &roots) {
            let Ok(dmap) = MappedFile::open(&cand.path) else {
                continue;
            };
            let Ok(dfile) = object::File::parse(dmap.bytes()) else {
                continue;
            };
            if !symbols::debug_file_matches(&file, &dfile, dmap.bytes(), cand.crc)
                || !has_dwarf(&dfile)
            {
                continue;
            }
            let sites = read_sites(&dfile, dmap.bytes(), functions)?;
            // Addresses as linked in the debug file must be those of the mapped file.
            let sites = sites
                .into_iter()
                .filter(|s| symbols::same_section_address(&file, &dfile, s.1))
                .collect();
            found = Some((sites, Some(cand.path)));
            break;
        }
        found.ok_or_else(|| {
            no_dwarf("stripped, and no separate debug file with DWARF found".into())
        })?
    };
    let mut out = Vec::new();
    for (function, vaddr, caller) in sites {
        let Some(offset) = symbols::file_offset(&file, vaddr) else {
            continue;
        };
        out.push(InlinedSite {
            function,
            caller,
            vaddr,
            target: ProbeTarget {
                path: open_path.clone(),
                offset,
            },
        });
    }
    out.sort_by(|a, b| (&a.function, a.vaddr).cmp(&(&b.function, b.vaddr)));
    out.dedup_by(|a, b| a.function == b.function && a.vaddr == b.vaddr);
    Ok(InlinedReport {
        sites: out,
        debug_file: from,
    })
}

#[derive(Debug, Clone, Default)]
pub struct InlinedReport {
    pub sites: Vec<InlinedSite>,
    /// The separate debug file the DWARF came from, when not the mapped file.
    pub debug_file: Option<String>,
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// A section's bytes, inflated when compressed; empty when absent.
fn section_data<'d>(
    file: &object::File<'d>,
    bytes: &'d [u8],
    name: &str,
) -> Result<Cow<'d, [u8]>, String> {
    let Some(s) = file.section_by_name(name) else {
        return Ok(Cow::Borrowed(&[]));
    };
    let r = s
        .compressed_file_range()
        .map_err(|e| format!("{name}: {e}"))?;
    match r.format {
        object::CompressionFormat::None => s
            .data()
            .map(Cow::Borrowed)
            .map_err(|e| format!("{name}: {e}")),
        object::CompressionFormat::Zlib => {
            if r.uncompressed_size > MAX_SECTION {
                return Err(format!(
                    "{name}: {} bytes uncompressed, more than we read",
                    r.uncompressed_size
                ));
            }
            let raw = bytes
                .get(r.offset as usize..(r.offset + r.compressed_size) as usize)
                .ok_or_else(|| format!("{name}: compressed data outside the file"))?;
            let v = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(
                raw,
                r.uncompressed_size as usize,
            )
            .map_err(|e| format!("{name}: cannot inflate: {e:?}"))?;
            Ok(Cow::Owned(v))
        }
        other => Err(format!(
            "{name}: compressed as {other:?}, which we do not read"
        )),
    }
}

type Reader<'d> = gimli::EndianSlice<'d, gimli::RunTimeEndian>;

/// (function, entry vaddr, caller) of every inlined copy of `functions`.
fn read_sites<'d>(
    file: &object::File<'d>,
    bytes: &'d [u8],
    functions: &[&str],
) -> Result<Vec<(String, u64, String)>, TraceError> {
    let bad = |e: String| TraceError::Io(format!("reading DWARF: {e}"));
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut err = None;
    let owned: gimli::DwarfSections<Cow<[u8]>> =
        gimli::DwarfSections::load(|id| -> Result<Cow<[u8]>, ()> {
            Ok(section_data(file, bytes, id.name()).unwrap_or_else(|e| {
                err.get_or_insert(e);
                Cow::Borrowed(&[])
            }))
        })
        .unwrap_or_else(|_| unreachable!());
    if let Some(e) = err {
        return Err(bad(e));
    }
    let dwarf = owned.borrow(|s| Reader::new(s, endian));

    // Subprogram DIEs by .debug_info offset: (name, origin). Inlined copies: (origin, entry, caller
    // DIE).
    let mut subprograms: HashMap<u64, (Option<String>, Option<u64>)> = HashMap::new();
    let mut copies: Vec<(u64, u64, Option<u64>)> = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(|e| bad(e.to_string()))? {
        let unit = dwarf.unit(header).map_err(|e| bad(e.to_string()))?;
        let global =
            |o: gimli::UnitOffset| o.to_debug_info_offset(&unit.header).map(|d| d.0 as u64);
        let origin_of = |e: &gimli::DebuggingInformationEntry<Reader>| {
            [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
                .iter()
                .find_map(|&at| match e.attr_value(at)? {
                    gimli::AttributeValue::UnitRef(o) => global(o),
                    gimli::AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
                    _ => None,
                })
        };
        // The enclosing out-of-line subprogram at each depth.
        let mut enclosing: Vec<(isize, u64)> = Vec::new();
        let mut entries = unit.entries();
        while let Some(e) = entries.next_dfs().map_err(|e| bad(e.to_string()))? {
            let depth = e.depth();
            while enclosing.last().is_some_and(|&(d, _)| d >= depth) {
                enclosing.pop();
            }
            let tag = e.tag();
            if tag == gimli::DW_TAG_subprogram {
                let Some(off) = global(e.offset()) else {
                    continue;
                };
                let name = e
                    .attr_value(gimli::DW_AT_name)
                    .and_then(|v| dwarf.attr_string(&unit, v).ok())
                    .map(|s| s.to_string_lossy().into_owned());
                subprograms.insert(off, (name, origin_of(e)));
                enclosing.push((depth, off));
            } else if tag == gimli::DW_TAG_inlined_subroutine {
                let Some(origin) = origin_of(e) else { continue };
                let addr = |at| {
                    e.attr_value(at)
                        .and_then(|v| dwarf.attr_address(&unit, v).ok().flatten())
                };
                let entry = addr(gimli::DW_AT_entry_pc)
                    .or_else(|| addr(gimli::DW_AT_low_pc))
                    .or_else(|| {
                        let mut r = dwarf.die_ranges(&unit, e).ok()?;
                        r.next().ok().flatten().map(|r| r.begin)
                    });
                if let Some(entry) = entry.filter(|&a| a != 0) {
                    copies.push((origin, entry, enclosing.last().map(|&(_, o)| o)));
                }
            }
        }
    }
    let name_of = |mut off: u64| -> Option<&str> {
        for _ in 0..MAX_CHAIN {
            let (name, origin) = subprograms.get(&off)?;
            if let Some(n) = name {
                return Some(n.as_str());
            }
            off = (*origin)?;
        }
        None
    };
    let mut out = Vec::new();
    for (origin, entry, caller) in copies {
        let Some(name) = name_of(origin) else {
            continue;
        };
        if functions.contains(&name) {
            let caller = caller.and_then(name_of).unwrap_or("?").to_owned();
            out.push((name.to_owned(), entry, caller));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID_314: &str = "/root/.cache/gilty/sid-pythons/root/usr/bin/python3.14";

    /// Debian sid's 3.14 (LTO+PGO, DWARF in a zlib-compressed debug file beside it): drop_gil is
    /// inlined into PyEval_SaveThread; take_gil never is. Uses our own process's root to find the
    /// file.
    #[test]
    fn drop_gil_inlined_into_pyeval_savethread_on_sid_314() {
        let dbg = "/root/.cache/gilty/sid-pythons/root/usr/bin/.debug/cda113240f3ba4c016991793a62dc0cfe01613.debug";
        if !std::path::Path::new(SID_314).exists() || !std::path::Path::new(dbg).exists() {
            eprintln!("SKIP sid python3.14 or its debug file not here (tools/sid_pythons.py)");
            return;
        }
        let me = std::process::id() as i32;
        let r = inlined_sites(me, SID_314, &["take_gil", "drop_gil"]).unwrap();
        assert!(
            r.debug_file.as_deref().is_some_and(|f| f.ends_with(dbg)),
            "{:?}",
            r.debug_file
        );
        let drops: Vec<&InlinedSite> = r
            .sites
            .iter()
            .filter(|s| s.function == "drop_gil")
            .collect();
        assert!(
            drops.iter().any(|s| s.caller == "PyEval_SaveThread"),
            "{drops:?}"
        );
        assert!(
            r.sites.iter().all(|s| s.function != "take_gil"),
            "{:?}",
            r.sites
        );
        // The same text segment as the out-of-line take_gil (take_gil.lto_priv.0 at 0x540620).
        let take = crate::symbols::resolve(me, SID_314, "take_gil").unwrap();
        let delta = 0x540620 - take.target.offset;
        assert!(
            drops.iter().all(|s| s.vaddr - s.target.offset == delta),
            "{drops:?}"
        );
    }
}
