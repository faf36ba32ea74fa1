//! Errors a user can act on. Every variant prints as one line.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceError {
    /// The kernel has no uprobe PMU. The string is the whole message.
    NoUprobePmu(String),
    /// perf_event_open or the ring-buffer mmap was refused. The string is the whole message.
    PermissionDenied(String),
    /// The probe function cannot be located in `path`; `hint` says why (stripped, ambiguous clone,
    /// ...).
    SymbolNotFound {
        symbol: String,
        path: String,
        hint: String,
    },
    /// The target process (or the file it mapped) went away. The string is the whole message.
    TargetGone(String),
    /// Anything else (bad argument, unexpected errno). The string is the whole message.
    Io(String),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::NoUprobePmu(m)
            | TraceError::PermissionDenied(m)
            | TraceError::TargetGone(m)
            | TraceError::Io(m) => f.write_str(m),
            TraceError::SymbolNotFound { symbol, path, hint } => write!(
                f,
                "exact mode needs the symbol {symbol} in {path} ({hint}); install debug symbols or use sampling"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

/// `kernel.perf_event_paranoid` as text, for permission messages ("?" when unreadable).
pub(crate) fn paranoid_level() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

pub(crate) fn permission_denied(what: &str) -> TraceError {
    TraceError::PermissionDenied(format!(
        "not permitted to {what} (need root or CAP_PERFMON; kernel.perf_event_paranoid={}; in a container, perf_event_open allowed by its seccomp profile)",
        paranoid_level()
    ))
}
