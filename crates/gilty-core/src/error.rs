//! Errors a user can act on. Each maps to one line of text and one exit code in the CLI.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    NoSuchProcess,
    NotPython,
    /// A Python process whose interpreter is not initialised yet (or no longer has a thread state):
    /// worth trying again until it is, or until it exits.
    NotInitialised,
    UnsupportedVersion,
    UnrecognisedInterpreter,
    PermissionDenied,
    TargetExited,
    /// Exact mode cannot trace this target (no symbols, no perf permission, no uprobes).
    ExactUnavailable,
    Internal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NoSuchProcess => "no_such_process",
            ErrorKind::NotPython => "not_python",
            ErrorKind::NotInitialised => "not_initialised",
            ErrorKind::UnsupportedVersion => "unsupported_version",
            ErrorKind::UnrecognisedInterpreter => "unrecognised_interpreter",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::TargetExited => "target_exited",
            ErrorKind::ExactUnavailable => "exact_unavailable",
            ErrorKind::Internal => "internal",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns an OS error from touching /proc/PID or the target's memory into a user-facing error.
pub fn from_os(pid: i32, err: &std::io::Error, what: &str) -> Error {
    // `what` names a file as "/proc/PID/maps": the message names the real one.
    let what = &what.replace("PID", &pid.to_string());
    match err.raw_os_error() {
        Some(libc::ESRCH) | Some(libc::ENOENT) => {
            if crate::process::procfs::exists(pid) {
                Error::new(
                    ErrorKind::TargetExited,
                    format!("pid {pid} exited while reading {what}"),
                )
            } else {
                Error::new(
                    ErrorKind::NoSuchProcess,
                    format!("no process with pid {pid}"),
                )
            }
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            // SAFETY: geteuid has no preconditions.
            let hint = if unsafe { libc::geteuid() } == 0 {
                "even as root: a kernel thread, or a process protected from ptrace (check kernel.yama.ptrace_scope and the capabilities of this container)"
            } else {
                "run as the same user or as root; check kernel.yama.ptrace_scope"
            };
            Error::new(
                ErrorKind::PermissionDenied,
                format!("not permitted to read {what} of pid {pid} ({hint})"),
            )
        }
        _ => Error::new(
            ErrorKind::Internal,
            format!("reading {what} of pid {pid}: {err}"),
        ),
    }
}

/// Bytes read from the target that no object of the expected kind could hold (freed, torn, or not
/// what the layout says): an error for the one read, never a user-facing `Error`.
pub(crate) fn invalid(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_error_names_the_real_proc_file() {
        let err = std::io::Error::from_raw_os_error(libc::EACCES);
        let text = from_os(4242, &err, "/proc/PID/maps").to_string();
        assert!(text.contains("/proc/4242/maps"), "{text}");
        assert!(!text.contains("PID"), "{text}");
    }
}
