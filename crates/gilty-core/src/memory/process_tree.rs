//! A process's descendants, from `/proc/PID/task/TID/children` (CONFIG_PROC_CHILDREN), falling back
//! to the parent field of every `/proc/*/stat` when that file does not exist.

use super::smaps::parse_stat;
use std::collections::{HashMap, HashSet};

/// Direct children of `pid` (of all its threads), or None when the children files are unavailable.
fn children_file(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    let mut any = false;
    for t in tasks.flatten() {
        let path = t.path().join("children");
        match std::fs::read_to_string(&path) {
            Ok(s) => {
                any = true;
                out.extend(
                    s.split_ascii_whitespace()
                        .filter_map(|v| v.parse::<i32>().ok()),
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !any => {
                // Either the kernel lacks CONFIG_PROC_CHILDREN or the thread just exited.
                if !std::path::Path::new(&format!("/proc/{pid}/task/{pid}/children")).exists()
                    && std::path::Path::new(&format!("/proc/{pid}")).exists()
                {
                    return None;
                }
            }
            Err(_) => {}
        }
    }
    Some(out)
}

/// Every process's parent, from /proc/*/stat.
fn parent_table() -> HashMap<i32, i32> {
    let mut table = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return table;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            table.insert(pid, stat.ppid);
        }
    }
    table
}

/// `(pid, parent)` of every descendant of `root` (not `root` itself), parents before children.
pub fn descendants(root: i32) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let mut seen = HashSet::from([root]);
    let mut queue = vec![root];
    let mut table: Option<HashMap<i32, i32>> = None;
    while let Some(parent) = queue.pop() {
        let kids = match children_file(parent) {
            Some(k) => k,
            None => {
                let t = table.get_or_insert_with(parent_table);
                let mut k: Vec<i32> = t
                    .iter()
                    .filter(|(_, &pp)| pp == parent)
                    .map(|(&p, _)| p)
                    .collect();
                k.sort_unstable();
                k
            }
        };
        for k in kids {
            if seen.insert(k) {
                out.push((k, parent));
                queue.push(k);
            }
        }
    }
    out
}

/// The command line, arguments separated by spaces ("" for kernel threads and exited processes).
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            let parts: Vec<String> = b
                .split(|&c| c == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            parts.join(" ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn finds_children_and_grandchildren() {
        // sh starts sleep in the background and waits: a child (sh) with a grandchild (sleep).
        let mut child = Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let pid = child.id() as i32;
        // Until sleep has been exec'd: between fork and exec the grandchild is a copy of the shell,
        // and on a loaded host that lasts long enough to be seen.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (found, grandchild) = loop {
            let d = descendants(me);
            let grandchild = d
                .iter()
                .find(|&&(_, parent)| parent == pid)
                .map(|&(p, _)| p);
            if grandchild.is_some_and(|g| cmdline(g).starts_with("sleep"))
                || std::time::Instant::now() > deadline
            {
                break (d, grandchild);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let sleep_cmdline = grandchild.map(cmdline).unwrap_or_default();
        if let Some(g) = grandchild {
            unsafe { libc::kill(g, libc::SIGKILL) };
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(pid, me)), "{found:?}");
        assert!(grandchild.is_some(), "{found:?}");
        assert!(sleep_cmdline.starts_with("sleep"), "{sleep_cmdline:?}");
    }

    #[test]
    fn parent_table_knows_us() {
        let t = parent_table();
        assert_eq!(
            t.get(&(std::process::id() as i32)).copied(),
            parse_stat(&std::fs::read_to_string("/proc/self/stat").unwrap()).map(|s| s.ppid)
        );
    }
}
