//! Native (C) stacks of the target's threads, merged with their Python stacks, without stopping it.
//!
//! - `perf`: kernel samples of running threads (user registers and a copy of the user stack);
//! - `blocked`: a thread blocked in a system call, from `/proc` (stack pointer, instruction
//!   pointer, stack memory) when its context-switch count shows it did not run meanwhile;
//! - `unwind`: framehop over the target's modules (`module`: `.eh_frame`, `.debug_frame`), naming
//!   frames from `.symtab` / `.dynsym` and separate debug files (`symbols`), with their source file
//!   and line from DWARF line tables where there are some (`lines`);
//! - `merge`: the evaluation-loop frames replaced by the Python frames they run;
//! - `snapshot`: one mixed stack per thread for `gilty dump --native`;
//! - `record`: a mixed stack per thread and pass for `gilty record --native`.

pub mod blocked;
pub mod lines;
pub mod merge;
pub mod module;
pub mod perf;
pub mod record;
pub mod snapshot;
pub mod symbols;
pub mod unwind;

pub use merge::MixedFrame;
pub use unwind::NativeFrame;
