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
    Some(if v & 1 == 1 { -((v >> 1) as i32) } else { (v >> 1) as i32 })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_310() {
        // lines 10 (bytes 0..4), 12 (4..10), none (10..12), 11 (12..20)
        let t = [4u8, 0, 6, 2, 2, 0x80, 8, 0xff];
        assert_eq!(line_310(&t, 10, 0), 10);
        assert_eq!(line_310(&t, 10, 6), 12);
        assert_eq!(line_310(&t, 10, 10), 12, "no line: the preceding instruction's");
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
        let t = [0x80 | (0 << 3) | 1, 0x00, 0x80 | (11 << 3) | 2, 1, 2, 0x80 | (13 << 3), 5, 0x80 | (15 << 3)];
        assert_eq!(line_311(&t, 5, 0), Some(5));
        assert_eq!(line_311(&t, 5, 1), Some(5));
        assert_eq!(line_311(&t, 5, 2), Some(6));
        assert_eq!(line_311(&t, 5, 4), Some(6));
        assert_eq!(line_311(&t, 5, 5), Some(4));
        assert_eq!(line_311(&t, 5, 6), Some(4), "no location: the preceding instruction's line");
        assert_eq!(line_311(&t, 5, 7), None, "past the table");
    }

    #[test]
    fn table_311_leading_instruction_without_location() {
        // COPY_FREE_VARS without location (1 unit), then a one-line entry (+1) of 2 units.
        let t = [0x80 | (15 << 3), 0x80 | (11 << 3) | 1, 4, 9];
        assert_eq!(line_311(&t, 7, 0), Some(7), "before any location: the first line");
        assert_eq!(line_311(&t, 7, 2), Some(8));
    }
}
