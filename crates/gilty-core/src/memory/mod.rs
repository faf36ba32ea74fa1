//! Memory of a prefork process tree, measured from outside: shared and private memory per process
//! (`smaps`), copy-on-write page by page (`pagemap`, `cow`), the tree itself (`process_tree`),
//! garbage-collection windows from the `collecting` flag (`gc_watch`), and the loop that runs them
//! (`tree_watch`); what each worker still shares with its master since fork (`fork_share`) and
//! which modules it imported itself (`module_names`). Target memory is read through `/proc/PID/mem`
//! (`process::memory`), which, unlike `process_vm_readv`, does not make a forked process copy the
//! pages it shares. See docs/memory.md for the method and its error.

pub mod cow;
pub mod faults;
pub mod fork_share;
pub mod gc_watch;
pub mod measurement;
pub mod module_names;
pub mod pagemap;
pub mod pass_cost;
pub mod process_tree;
pub mod smaps;
mod tree_members;
pub mod tree_watch;
