//! `Target.dump`'s conversion: one thread of gilty-core's `Dump` as a Python dict.

use gilty_core::sampling::dump::{DumpThread, NativeStack};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

pub(crate) fn thread_dict<'py>(
    py: Python<'py>,
    thread: DumpThread,
    locals: bool,
    positions: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let DumpThread {
        snapshot: th,
        handling,
        native,
        frames,
    } = thread;
    let d = PyDict::new(py);
    d.set_item("tid", th.tid)?;
    d.set_item("name", th.name)?;
    d.set_item("state", th.state as u8)?;
    d.set_item("syscall", th.syscall)?;
    let stack = PyList::empty(py);
    for f in th.stack {
        stack.append(PyTuple::new(
            py,
            [
                f.function.into_pyobject(py)?.into_any(),
                f.file.into_pyobject(py)?.into_any(),
                f.line.into_pyobject(py)?.into_any(),
            ],
        )?)?;
    }
    d.set_item("stack", stack)?;
    if let Some(found) = handling {
        d.set_item("handling_exception", found)?;
    }
    match native {
        Some(Ok(NativeStack { frames, partial })) => {
            d.set_item("native_stack", mixed_stack(py, &frames)?)?;
            if let Some(why) = partial {
                d.set_item("native_error", why)?;
            }
        }
        Some(Err(e)) => d.set_item("native_error", e)?,
        None => {}
    }
    if locals || positions {
        match frames {
            Some(Ok(frames)) => {
                if positions {
                    let at = PyList::empty(py);
                    for f in &frames {
                        match f.position {
                            Some(p) => at.append((p.line, p.end_line, p.column, p.end_column))?,
                            None => at.append(py.None())?,
                        }
                    }
                    d.set_item("positions", at)?;
                }
                let per_frame = PyList::empty(py);
                for f in frames.into_iter().filter(|_| locals) {
                    match f.error {
                        Some(e) => per_frame.append((py.None(), e))?,
                        None => {
                            let vs: Vec<(String, bool, String)> = f
                                .variables
                                .into_iter()
                                .map(|v| (v.name, v.arg, v.repr))
                                .collect();
                            per_frame.append((vs, py.None()))?
                        }
                    }
                }
                if locals {
                    d.set_item("locals", per_frame)?;
                }
            }
            Some(Err(e)) if locals => d.set_item("locals_error", e)?,
            Some(Err(e)) => d.set_item("positions_error", e)?,
            None => {}
        }
    }
    Ok(d)
}

/// A mixed stack as tuples: ("py", function, file, line) or ("c", function, library, offset,
/// source file, source line), the last two None without DWARF line tables.
fn mixed_stack<'py>(
    py: Python<'py>,
    frames: &[gilty_core::native::MixedFrame],
) -> PyResult<Bound<'py, PyList>> {
    use gilty_core::native::MixedFrame;
    let out = PyList::empty(py);
    for f in frames {
        match f {
            MixedFrame::Python(p) => {
                out.append(("py", p.function.as_str(), p.file.as_str(), p.line))?
            }
            MixedFrame::Native(n) => out.append((
                "c",
                n.function.as_deref(),
                n.library.as_deref(),
                n.offset,
                n.file.as_deref(),
                n.line,
            ))?,
        }
    }
    Ok(out)
}
