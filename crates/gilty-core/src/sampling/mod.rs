//! Sampling: the loop that reads every thread at a fixed rate (`sampler`), classifies its state
//! (`classify`, `cpu_wait`), and folds each pass into runs, counts and blame (`aggregate`),
//! positions and task stacks (`positions`, `task_record`); one schedule over several processes
//! (`process_set`); the in-process monitor's windows (`gil_stats`).

pub mod aggregate;
pub mod classify;
pub mod core_dump;
pub mod cpu_wait;
pub mod dump;
pub mod gil_stats;
mod native_part;
pub mod positions;
pub mod process_set;
pub mod realtime;
pub mod sampler;
pub mod sched_marks;
mod stacks;
mod task_part;
pub mod task_record;
mod thread_list;
mod thread_track;
