//! Line numbers from code objects' line tables.
//! 3.10: (byte delta, line delta) pairs (Objects/lnotab_notes.txt of 3.10).
//! 3.11+: the location table described in Objects/locations.md.

/// Line for a byte offset into 3.10 bytecode, or None when the instruction has no line.
pub fn line_310(table: &[u8], firstlineno: i32, byte_offset: i64) -> Option<i32> {
    let mut line = firstlineno;
    let mut end: i64 = 0;
    let mut current: Option<i32> = Some(firstlineno);
    for pair in table.chunks_exact(2) {
        if end > byte_offset {
            break;
        }
        let sdelta = pair[0] as i64;
        let ldelta = pair[1] as i8;
        end += sdelta;
        if ldelta == -128 {
            current = None;
        } else {
            line += ldelta as i32;
            current = Some(line);
        }
    }
    current
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

/// Line for an instruction index (in 16-bit code units) in 3.11+ bytecode.
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
        let this_line: Option<i32> = match code {
            15 => None,
            14 => {
                line += read_svarint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
                read_varint(table, &mut i)?;
                Some(line)
            }
            13 => {
                line += read_svarint(table, &mut i)?;
                Some(line)
            }
            10..=12 => {
                line += (code - 10) as i32;
                i += 2;
                Some(line)
            }
            _ => {
                i += 1;
                Some(line)
            }
        };
        if unit_index < addr + length {
            return this_line;
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
        assert_eq!(line_310(&t, 10, 0), Some(10));
        assert_eq!(line_310(&t, 10, 6), Some(12));
        assert_eq!(line_310(&t, 10, 10), None);
        assert_eq!(line_310(&t, 10, 14), Some(11));
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
        assert_eq!(line_311(&t, 5, 6), None);
    }
}
