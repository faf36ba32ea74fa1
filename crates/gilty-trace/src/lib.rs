//! Exact event tracing of a live CPython process.
//!
//! Uprobes are defined by name in tracefs (`uprobe_events`) and opened per thread as tracepoint
//! perf events, or, without tracefs, created through the kernel's uprobe PMU (`perf_event_open`
//! with the PMU type read from `/sys/bus/event_source/devices/uprobe/type`). Each thread's events
//! write into one mmap'd ring buffer that [`Tracer::poll`] drains without blocking. No bpftrace or
//! BCC is involved; closing the fds (drop, or our own death) takes the probes out of the target.
//!
//! Events are per thread without `inherit` (with the uprobe PMU, inherit makes the target's
//! `clone()` fail: see `tracer.rs`); a background thread attaches threads created later within
//! milliseconds and does the closing. Removing a probe costs the kernel ~0.1 s; with named probes a
//! keeper process pays it once per probe after gilty is gone (`tracefs.rs`, `keeper.rs`), with the
//! PMU gilty pays it per probe and thread.
//!
//! Modules: [`symbols`] turns a function name into a (file, offset) probe target; [`attr`] is the
//! `perf_event_attr` ABI; [`ring`] reads the ring buffers; `tracefs` defines named probes and
//! `keeper` holds their last events; [`tracer`] ties them together.

pub mod attr;
pub mod error;
pub mod inlined;
mod keeper;
pub mod ring;
pub mod symbols;
mod thread_events;
mod tracefs;
pub mod tracer;
mod worker;

pub use error::TraceError;
pub use inlined::{inlined_sites, InlinedReport, InlinedSite};
pub use symbols::{resolve, ProbeTarget, ResolvedSymbol};
pub use tracer::{Event, ProbeKind, ProbeSpec, Reg, Tracer, FORCE_PMU_ENV};
