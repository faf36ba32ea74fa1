//! gilty-core: reads a live CPython process from outside (never writing to it) and samples what
//! each thread does with respect to the GIL.

pub mod asyncio;
pub mod clock;
pub mod error;
pub mod exact;
pub mod interp;
pub mod memory;
pub mod native;
pub mod process;
pub mod sampling;
pub mod specialization;

pub use error::{Error, ErrorKind, Result};
