//! `Target.extension_modules`'s conversion: gilty-core's `ModuleScan` as a Python dict.

use gilty_core::interp::module_slots::{GilDecl, Init, ModuleScan};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

pub(crate) fn scan_dict<'py>(py: Python<'py>, scan: &ModuleScan) -> PyResult<Bound<'py, PyDict>> {
    let modules = PyList::empty(py);
    for m in &scan.modules {
        let d = PyDict::new(py);
        d.set_item("name", &m.name)?;
        d.set_item("def_name", &m.def_name)?;
        d.set_item(
            "init",
            match m.init {
                Init::MultiPhase => "multi-phase",
                Init::SinglePhase => "single-phase",
                Init::Export => "export",
            },
        )?;
        let (gil, why) = match &m.gil {
            GilDecl::NotUsed => ("not_used", None),
            GilDecl::Used => ("used", None),
            GilDecl::Undeclared => ("undeclared", None),
            GilDecl::Unknown(why) => ("unknown", Some(*why)),
        };
        d.set_item("gil", gil)?;
        d.set_item("unknown_why", why)?;
        d.set_item("path", &m.path)?;
        d.set_item("builtin", m.builtin)?;
        modules.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("modules", modules)?;
    out.set_item("unreadable", scan.unreadable)?;
    out.set_item("first_error", &scan.first_error)?;
    Ok(out)
}
