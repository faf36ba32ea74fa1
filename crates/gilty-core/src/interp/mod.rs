//! Reading the interpreter's own objects out of the target's memory: attach-time discovery and
//! validation, thread states and their names, frames and line tables, locals and object reprs, the
//! exception being handled, GC configuration.

pub mod exceptions;
pub mod frames;
pub mod gc_config;
pub mod interpreter;
pub mod linetable;
pub mod locals;
pub mod lock_wait;
pub mod method_class;
pub mod module_slots;
pub mod object_graph;
pub mod object_repr;
pub mod pyobjects;
pub mod thread_names;
pub mod threads;
