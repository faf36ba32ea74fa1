//! Access to another process: its memory maps, its memory, its /proc files, the ELF symbols of its
//! binaries and the syscall numbers gilty names. Read-only.

pub mod block_cache;
pub mod core_file;
pub mod elf;
#[cfg(test)]
pub(crate) mod forked;
pub mod maps;
pub mod memory;
pub mod procfs;
pub mod switches;
pub mod syscalls;
pub mod target_memory;
