//! Line numbers from code objects' line tables.
//! 3.10: (byte delta, line delta) pairs (Objects/lnotab_notes.txt of 3.10).
//! 3.11+: the location table described in Objects/locations.md.
//!
//! Both tables can mark an instruction as having no line (3.10: line delta -128; 3.11+: entry code
//! 15). The compiler leaves some instructions without a location, among them the backward jump that
//! closes a `for` loop whose body ends in an `if` (3.10 JUMP_ABSOLUTE, 3.11 JUMP_BACKWARD), where a
//! thread checks for a GIL drop request and so is often sampled. Such an instruction takes the line
//! of the closest preceding instruction that has one (the table's running line, which a no-location
//! entry leaves unchanged), as py-spy does and as 3.12's compiler itself does by copying the
//! jump into each predecessor with that predecessor's line; before any located instruction, the
//! function's first line.

/// Line for a byte offset into 3.10 bytecode (see the module comment for instructions without one).
pub fn line_310(table: &[u8], firstlineno: i32, byte_offset: i64) -> i32 {
    let mut line = firstlineno;
    let mut end: i64 = 0;
    for pair in table.chunks_exact(2) {
        if end > byte_offset {
            break;
        }
        let sdelta = pair[0] as i64;
        let ldelta = pair[1] as i8;
        end += sdelta;
        if ldelta != -128 {
            line += ldelta as i32;
        }
    }
    line
}

fn read_varint(t: &[u8], i: &mut usize) -> Option<u32> {
    let mut shift = 0;
    let mut val: u32 = 0;
    loop {
        let b = *t.get(*i)?;
        *i += 1;
        val |= ((b & 63) as u32) << shift;
        shift += 6;
        if b & 64 == 0 || shift > 30 {
            return Some(val);
        }
    }
}

fn read_svarint(t: &[u8], i: &mut usize) -> Option<i32> {
    let v = read_varint(t, i)?;
    Some(if v & 1 == 1 {
        -((v >> 1) as i32)
    } else {
        (v >> 1) as i32
    })
}

/// Line for an instruction index (in 16-bit code units) in 3.11+ bytecode; None when the index is
/// past the table or the table is malformed (the code object changed under us).
pub fn line_311(table: &[u8], firstlineno: i32, unit_index: i64) -> Option<i32> {
    let mut line = firstlineno;
    let mut addr: i64 = 0;
    let mut i = 0usize;
    while i < table.len() {
        let first = table[i];
        i += 1;
        if first & 0x80 == 0 {
            return None; // not at an entry start: corrupt or torn table
        }
        let code = (first >> 3) & 15;
        let length = ((first & 7) + 1) as i64;
        match code {
            15 => {} // no location: keeps the running line
            14 => {
                line += read_svarint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
            }
            13 => line += read_svarint(table, &mut i)?,
            10..=12 => {
                line += (code - 10) as i32;
                i += 2;
            }
            _ => i += 1,
        }
        if unit_index < addr + length {
            return Some(line);
        }
        addr += length;
    }
    None
}

/// Where an instruction is in the source: its line range and column range (0-based UTF-8 byte
/// columns, as `co_positions()` gives them; None where the table has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    pub line: i32,
    pub end_line: Option<i32>,
    pub column: Option<i32>,
    pub end_column: Option<i32>,
}

/// The position of an instruction index (16-bit code units) in 3.11+ bytecode, as `co_positions()`
/// gives it (Objects/locations.md), except that an instruction without a location takes the running
/// line as `line_311` does (and no end line or columns). None when the index is past the table or
/// the table is malformed. Entries before the instruction's are only stepped over, as `line_311`
/// does (this runs for every frame of every stack the sampler reads): only its own columns are
/// read.
pub fn position_311(table: &[u8], firstlineno: i32, unit_index: i64) -> Option<Position> {
    let mut line = firstlineno;
    let mut addr: i64 = 0;
    let mut i = 0usize;
    while i < table.len() {
        let first = table[i];
        i += 1;
        if first & 0x80 == 0 {
            return None;
        }
        let code = (first >> 3) & 15;
        let length = ((first & 7) + 1) as i64;
        if unit_index < addr + length {
            return entry_position(table, i, code, line);
        }
        match code {
            15 => {}
            14 => {
                line += read_svarint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
            }
            13 => line += read_svarint(table, &mut i)?,
            10..=12 => {
                line += (code - 10) as i32;
                i += 2;
            }
            _ => i += 1,
        }
        addr += length;
    }
    None
}

/// The position given by the entry of kind `code` whose data starts at `table[i]`, the running line
/// being `line` before it.
fn entry_position(table: &[u8], mut i: usize, code: u8, line: i32) -> Option<Position> {
    let col = |v: u32| if v == 0 { None } else { Some(v as i32 - 1) };
    Some(match code {
        15 => Position {
            line,
            end_line: None,
            column: None,
            end_column: None,
        },
        14 => {
            let line = line + read_svarint(table, &mut i)?;
            let end_line = line + read_varint(table, &mut i)? as i32;
            let (c, e) = (read_varint(table, &mut i)?, read_varint(table, &mut i)?);
            Position {
                line,
                end_line: Some(end_line),
                column: col(c),
                end_column: col(e),
            }
        }
        13 => {
            let line = line + read_svarint(table, &mut i)?;
            Position {
                line,
                end_line: Some(line),
                column: None,
                end_column: None,
            }
        }
        10..=12 => {
            let line = line + (code - 10) as i32;
            let (c, e) = (*table.get(i)? as i32, *table.get(i + 1)? as i32);
            Position {
                line,
                end_line: Some(line),
                column: Some(c),
                end_column: Some(e),
            }
        }
        _ => {
            let b = *table.get(i)? as i32;
            let c = code as i32 * 8 + ((b >> 4) & 7);
            Position {
                line,
                end_line: Some(line),
                column: Some(c),
                end_column: Some(c + (b & 15)),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_310() {
        // lines 10 (bytes 0..4), 12 (4..10), none (10..12), 11 (12..20)
        let t = [4u8, 0, 6, 2, 2, 0x80, 8, 0xff];
        assert_eq!(line_310(&t, 10, 0), 10);
        assert_eq!(line_310(&t, 10, 6), 12);
        assert_eq!(
            line_310(&t, 10, 10),
            12,
            "no line: the preceding instruction's"
        );
        assert_eq!(line_310(&t, 10, 14), 11);
    }

    #[test]
    fn table_310_leading_instruction_without_line() {
        // GEN_START (bytes 0..2) has no line; then line 4 for bytes 2..8.
        let t = [2u8, 0x80, 6, 1];
        assert_eq!(line_310(&t, 3, 0), 3, "before any line: the first line");
        assert_eq!(line_310(&t, 3, 4), 4);
    }

    /// The 3.10.13 table of `for i in itertools.count(): if i & 1: n += 1` (first line 16): its
    /// closing JUMP_ABSOLUTE (bytes 32..34) has no line and takes the body's (co_lines says None).
    #[test]
    fn table_310_for_loop_back_jump() {
        let t = [4u8, 1, 12, 1, 8, 1, 8, 1, 2, 128, 4, 254];
        let lines: Vec<i32> = (0..38).step_by(2).map(|b| line_310(&t, 16, b)).collect();
        let mut want = vec![17, 17];
        want.extend([18; 6]);
        want.extend([19; 4]);
        want.extend([20; 4]);
        want.push(20); // the jump without a line
        want.extend([18; 2]);
        assert_eq!(lines, want);
    }

    #[test]
    fn table_311() {
        // entry 1: short form (code 0), 2 units, line +0 -> 5
        // entry 2: one-line form code 11 (line +1), 3 units -> 6
        // entry 3: no-column form code 13, 1 unit, line delta -2 (svarint 5) -> 4
        // entry 4: no location (code 15), 1 unit
        let t = [
            0x80 | 1, // code 0
            0x00,
            0x80 | (11 << 3) | 2,
            1,
            2,
            0x80 | (13 << 3),
            5,
            0x80 | (15 << 3),
        ];
        assert_eq!(line_311(&t, 5, 0), Some(5));
        assert_eq!(line_311(&t, 5, 1), Some(5));
        assert_eq!(line_311(&t, 5, 2), Some(6));
        assert_eq!(line_311(&t, 5, 4), Some(6));
        assert_eq!(line_311(&t, 5, 5), Some(4));
        assert_eq!(
            line_311(&t, 5, 6),
            Some(4),
            "no location: the preceding instruction's line"
        );
        assert_eq!(line_311(&t, 5, 7), None, "past the table");
    }

    #[test]
    fn table_311_leading_instruction_without_location() {
        // COPY_FREE_VARS without location (1 unit), then a one-line entry (+1) of 2 units.
        let t = [0x80 | (15 << 3), 0x80 | (11 << 3) | 1, 4, 9];
        assert_eq!(
            line_311(&t, 7, 0),
            Some(7),
            "before any location: the first line"
        );
        assert_eq!(line_311(&t, 7, 2), Some(8));
    }

    /// 3.12.1's table of a list comprehension split over lines (first line 1):
    /// `return [\n str(\n x\n )\n for x in xs\n ]`: its CALL (unit 16) spans lines 3-5, columns
    /// 8-9, as `dis` gives it. (The decoder was also checked against every `co_positions()` entry
    /// of a few stdlib modules on 3.11, 3.12 and 3.13.)
    #[test]
    fn positions_of_a_multiline_comprehension() {
        let hex = "8000f00a001214f609050c06f008000d0ef40700090cd80c0df50302090af203050c06f000050506f9f200050c06";
        let t: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let p = position_311(&t, 1, 16).unwrap();
        assert_eq!(
            p,
            Position {
                line: 3,
                end_line: Some(5),
                column: Some(8),
                end_column: Some(9)
            }
        );
        assert_eq!(
            Some(p.line),
            line_311(&t, 1, 16),
            "the same line as line_311"
        );
        let resume = position_311(&t, 1, 0).unwrap();
        assert_eq!(
            (resume.line, resume.column),
            (1, Some(0)),
            "RESUME stands on the def line"
        );
    }
}
