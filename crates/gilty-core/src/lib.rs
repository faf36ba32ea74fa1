//! gilty-core: reads a live CPython process from outside (never writing to it) and samples what each
//! thread does with respect to the GIL.

pub mod aggregate;
pub mod asyncio;
pub mod classify;
pub mod clock;
pub mod cpu_wait;
pub mod elf;
pub mod error;
pub mod exact;
pub mod exceptions;
pub mod frames;
pub mod gc_config;
pub mod gil_stats;
pub mod interpreter;
pub mod linetable;
pub mod locals;
pub mod memory;
pub mod method_class;
pub mod native;
pub mod object_graph;
pub mod object_repr;
pub mod positions;
pub mod process;
pub mod process_set;
pub mod pyobjects;
pub mod realtime;
pub mod sampler;
pub mod specialization;
pub mod syscalls;
pub mod task_record;
pub mod thread_names;
pub mod threads;

pub use error::{Error, ErrorKind, Result};
