//! Named uprobes defined in tracefs (`uprobe_events`), opened per thread as tracepoint perf events.
//!
//! Why: with the uprobe PMU every perf event carries its own private probe, and closing one
//! unregisters it, which waits for RCU grace periods (~0.1 s per event and thread, serialised). A
//! named probe is one kernel object shared by all its perf events: closing an event that is not the
//! probe's last only takes the target's breakpoints out when no other event of the same process
//! still wants them (instant); the slow unregister happens once per probe, at the last close. The
//! keeper process (`keeper.rs`) holds that last event (an "anchor" per probe), so gilty's own
//! closes are all instant and the target's int3s go when gilty's events close, also when the kernel
//! closes them because gilty was killed.
//!
//! Probes live in the group `gilty_<gilty pid>_<n>`; the keeper deletes them when gilty is gone,
//! and a later gilty deletes the groups of gilty processes that no longer exist (a keeper killed
//! too). `uprobe_events` is only ever opened for appending: truncating it would delete every probe
//! on the host.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where tracefs is, or is mounted by us if root and nothing is there yet.
const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
/// Group names begin with this, then gilty's pid.
pub(crate) const GROUP_PREFIX: &str = "gilty_";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The tracefs directory holding `uprobe_events`, mounting tracefs on `/sys/kernel/tracing` when it
/// is absent and we may (root). None: no tracefs, use the uprobe PMU.
pub(crate) fn root() -> Option<PathBuf> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(dir).join("uprobe_events").exists() {
            return Some(PathBuf::from(dir));
        }
    }
    // SAFETY: plain syscalls with NUL-terminated constant strings.
    if unsafe { libc::geteuid() } != 0 || !Path::new(TRACEFS).is_dir() {
        return None;
    }
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    (rc == 0 && Path::new(TRACEFS).join("uprobe_events").exists()).then(|| PathBuf::from(TRACEFS))
}

/// One probe line for `uprobe_events`.
pub(crate) struct Definition {
    pub name: String,
    pub ret: bool,
    pub path: String,
    pub offset: u64,
}

/// Probes defined in one group; `remove` (or drop) deletes them again when no perf event uses them.
pub(crate) struct Group {
    pub root: PathBuf,
    pub group: String,
    pub names: Vec<String>,
    /// Tracepoint id of each probe (`events/<group>/<name>/id`), the `config` of its perf events.
    pub ids: Vec<u64>,
    removed: bool,
}

/// A fresh group name for this process.
pub(crate) fn new_group_name() -> String {
    format!(
        "{GROUP_PREFIX}{}_{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// An event name tracefs accepts: letters, digits, underscores, not starting with a digit.
pub(crate) fn event_name(i: usize, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("p{i}_{clean}")
}

pub(crate) fn define_line(group: &str, d: &Definition) -> String {
    format!(
        "{}:{group}/{} {}:{:#x}",
        if d.ret { 'r' } else { 'p' },
        d.name,
        d.path,
        d.offset
    )
}

pub(crate) fn remove_line(group: &str, name: &str) -> String {
    format!("-:{group}/{name}")
}

/// Appends one command to `uprobe_events` (one write: the kernel runs each write's lines in order).
pub(crate) fn command(root: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("uprobe_events"))?;
    f.write_all(format!("{line}\n").as_bytes())
}

impl Group {
    /// Defines every probe in a new group and reads their tracepoint ids. On any failure the probes
    /// defined so far are deleted and the error says which line failed.
    pub(crate) fn define(root: &Path, defs: &[Definition]) -> Result<Group, String> {
        let mut g = Group {
            root: root.to_owned(),
            group: new_group_name(),
            names: Vec::new(),
            ids: Vec::new(),
            removed: false,
        };
        for d in defs {
            if d.path.chars().any(char::is_whitespace) {
                return Err(format!(
                    "path {:?} has white space, which uprobe_events cannot take",
                    d.path
                ));
            }
            let line = define_line(&g.group, d);
            command(root, &line).map_err(|e| format!("{line}: {e}"))?;
            g.names.push(d.name.clone());
            let id_path = root.join("events").join(&g.group).join(&d.name).join("id");
            let id = std::fs::read_to_string(&id_path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| format!("no tracepoint id at {}", id_path.display()))?;
            g.ids.push(id);
        }
        Ok(g)
    }

    /// The lines that delete this group's probes (for the keeper, which may not allocate after
    /// fork).
    pub(crate) fn remove_lines(&self) -> Vec<String> {
        self.names
            .iter()
            .map(|n| format!("{}\n", remove_line(&self.group, n)))
            .collect()
    }

    /// From now on someone else (the keeper) deletes the probes.
    pub(crate) fn hand_over(mut self) {
        self.removed = true;
    }

    fn remove(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        for n in &self.names {
            let _ = command(&self.root, &remove_line(&self.group, n));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Deletes the probes of gilty processes that no longer exist (their keeper was killed too). Probes
/// of a live gilty are left alone; a probe still in use makes the kernel refuse (EBUSY), also left
/// alone.
pub(crate) fn remove_stale(root: &Path) {
    let Ok(text) = std::fs::read_to_string(root.join("uprobe_events")) else {
        return;
    };
    for (group, name) in stale_entries(&text, |pid| Path::new(&format!("/proc/{pid}")).exists()) {
        let _ = command(root, &remove_line(&group, &name));
    }
}

/// (group, event) of every `uprobe_events` line of a gilty group whose owner pid is not alive.
pub(crate) fn stale_entries(text: &str, alive: impl Fn(u32) -> bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        // "p:gilty_123_0/p0_take_gil /path:0x..." (r: for a return probe)
        let Some(head) = line.split_whitespace().next() else {
            continue;
        };
        let Some((_, ev)) = head.split_once(':') else {
            continue;
        };
        let Some((group, name)) = ev.split_once('/') else {
            continue;
        };
        let Some(rest) = group.strip_prefix(GROUP_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('_').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !alive(pid) {
            out.push((group.to_owned(), name.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let d = Definition {
            name: event_name(1, "take_gil:return"),
            ret: true,
            path: "/proc/7/root/usr/bin/python3".into(),
            offset: 0x1a2b,
        };
        assert_eq!(d.name, "p1_take_gil_return");
        assert_eq!(
            define_line("gilty_5_0", &d),
            "r:gilty_5_0/p1_take_gil_return /proc/7/root/usr/bin/python3:0x1a2b"
        );
        assert_eq!(remove_line("gilty_5_0", "p0_x"), "-:gilty_5_0/p0_x");
    }

    #[test]
    fn stale_groups_are_those_of_dead_gilty_processes() {
        let me = std::process::id();
        let text = format!(
            "p:gilty_111_0/p0_take_gil /a:0x10\nr:gilty_111_0/p1_take_gil_return /a:0x10\n\
             p:gilty_222_3/p0_take_gil /a:0x10\np:gilty_{me}_0/p0_take_gil /a:0x10\n\
             p:other/gilty_111_0 /a:0x10\np:gilty_x/p0 /a:0x10\n"
        );
        let got = stale_entries(&text, |pid| pid == 222);
        assert_eq!(
            got,
            vec![
                ("gilty_111_0".into(), "p0_take_gil".into()),
                ("gilty_111_0".into(), "p1_take_gil_return".into())
            ]
        );
    }
}
