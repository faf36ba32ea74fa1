//! The memory an attached interpreter is read through: a live process's (/proc/PID/mem) or a core
//! file's. Kept apart from `memory` (the trait and its live reader), which the core reader uses.

use crate::process::core_file::CoreFile;
use crate::process::memory::{Memory, ProcessMemory};
use std::io;
use std::sync::Arc;

/// Where an attached interpreter's memory is read from: a live process, or a core file of one.
pub enum TargetMemory {
    Process(ProcessMemory),
    Core(Arc<CoreFile>),
}

impl TargetMemory {
    /// The core file, when reading one (a core's threads and registers come from it, not /proc).
    pub fn core(&self) -> Option<&CoreFile> {
        match self {
            TargetMemory::Core(c) => Some(c),
            TargetMemory::Process(_) => None,
        }
    }
}

impl Memory for TargetMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            TargetMemory::Process(m) => m.read(addr, buf),
            TargetMemory::Core(c) => c.read(addr, buf),
        }
    }
}
