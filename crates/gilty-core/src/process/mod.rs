//! Access to another process: its memory maps, its memory, and its /proc files. Read-only.

pub mod block_cache;
#[cfg(test)]
pub(crate) mod forked;
pub mod maps;
pub mod memory;
pub mod procfs;
pub mod switches;
