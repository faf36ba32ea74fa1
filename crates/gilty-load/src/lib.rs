//! gilty-load: an open-loop HTTP load generator. Requests start on a schedule fixed in advance
//! (constant or Poisson arrivals), whether or not earlier ones returned; latency is measured from
//! the intended start, so a stalled server is charged for every request it delayed (coordinated
//! omission corrected, as wrk2 does). Knows nothing about Python; gilty's `load` command drives it.

pub mod http1;
pub mod plan;
pub mod runner;
pub mod schedule;
pub mod stats;

pub use plan::{Arrivals, Plan, RequestSpec};
pub use runner::{run, RunResult};
