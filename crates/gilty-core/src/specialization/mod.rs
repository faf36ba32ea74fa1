//! Specialization of hot code (PEP 659, 3.11+), read from outside: which instructions the adaptive
//! interpreter specialized, which count down to an attempt or back off, and how their counters
//! move.
//!
//! `decode` turns `co_code_adaptive` bytes into instructions with form and counter (versioned by
//! the generated `OpcodeTable`), `code` reads code objects from the target, `watch` samples where
//! threads run and follows the hot code objects over time.

pub mod code;
pub mod decode;
pub mod opcache;
pub mod watch;

use crate::error::{Error, ErrorKind, Result};
use crate::interp::interpreter::Interpreter;
use gilty_layouts::opcodes::OpcodeTable;

/// The opcode table for an attached interpreter, or the one-line reason there is none.
pub fn opcode_table(interp: &Interpreter) -> Result<&'static OpcodeTable> {
    let (major, minor, _) = interp.version;
    gilty_layouts::opcodes_for(major, minor).ok_or_else(|| {
        Error::new(
            ErrorKind::UnsupportedVersion,
            format!(
                "pid {} runs Python {}, which has no specializing interpreter (3.11+); its opcache report is not implemented",
                interp.pid,
                interp.version_string()
            ),
        )
    })
}

/// The 3.10 opcache layout for an attached interpreter, if it has one.
pub fn opcache_layout(
    interp: &Interpreter,
) -> Option<&'static gilty_layouts::opcodes::OpcacheLayout> {
    gilty_layouts::opcache_for(interp.version.0, interp.version.1)
}
