//! Parsing /proc/PID/maps.

use crate::error::{from_os, Result};

#[derive(Debug, Clone)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub path: Option<String>,
}

pub fn read_maps(pid: i32) -> Result<Vec<MapEntry>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| from_os(pid, &e, "/proc/PID/maps"))?;
    Ok(parse_maps(&text))
}

pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(offset), Some(_dev), Some(_inode)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let path = parts
            .next()
            .map(|p| p.trim())
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        out.push(MapEntry {
            start,
            end,
            perms: perms.to_owned(),
            offset,
            path,
        });
    }
    out
}

impl MapEntry {
    pub fn file_name(&self) -> Option<&str> {
        self.path.as_deref().and_then(|p| p.rsplit('/').next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_with_and_without_paths() {
        let text = "55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 123 /usr/bin/python3.11\n\
                    7f00-8f00 rw-p 00001000 00:00 0 \n\
                    7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]\n";
        let m = parse_maps(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].start, 0x55d0c0a00000);
        assert_eq!(m[0].file_name(), Some("python3.11"));
        assert_eq!(m[1].path, None);
        assert_eq!(m[1].offset, 0x1000);
        assert_eq!(m[2].path.as_deref(), Some("[stack]"));
    }
}
