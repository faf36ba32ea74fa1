//! Exact event tracing of a live CPython process.
//!
//! Uprobes are created through the kernel's uprobe PMU (`perf_event_open` with the PMU type read from
//! `/sys/bus/event_source/devices/uprobe/type`), one set of perf events per thread of the target, each
//! thread's events writing into one mmap'd ring buffer that [`Tracer::poll`] drains without blocking.
//! No bpftrace, BCC or tracefs is involved; closing the fds (drop, or our own death) removes the probes.
//!
//! Events are per thread without `inherit` (with the uprobe PMU, inherit makes the target's `clone()` fail:
//! see `tracer.rs`); a background thread attaches threads created later within milliseconds and does the
//! slow closing (~0.1 s per perf event in the kernel).
//!
//! Modules: [`symbols`] turns a function name into a (file, offset) probe target; [`attr`] is the
//! `perf_event_attr` ABI; [`ring`] reads the ring buffers; [`tracer`] ties them together.

pub mod attr;
pub mod error;
mod keeper;
pub mod ring;
pub mod symbols;
mod thread_events;
mod tracefs;
pub mod tracer;
mod worker;

pub use error::TraceError;
pub use symbols::{resolve, ProbeTarget, ResolvedSymbol};
pub use tracer::{Event, ProbeKind, ProbeSpec, Reg, Tracer, FORCE_PMU_ENV};
