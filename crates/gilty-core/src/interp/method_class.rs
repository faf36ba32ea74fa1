//! The class of a 3.10 method, for qualified function names.
//!
//! 3.11+ code objects carry `co_qualname` (`Foo.run`, `main.<locals>.<lambda>`); 3.10's do not. As
//! py-spy does, gilty takes the class from the first argument when the code's first parameter is
//! named `self` (its type) or `cls` (itself a type). That is the class of the object the method was
//! called on, so an inherited method is named after the subclass (`Worker.run` where 3.11 says
//! `Thread.run`), and functions nested in methods or not defined in a class stay unqualified.
//! A NULL first local (an argument moved into a cell for a closure, or deleted) or a failed read
//! leaves the plain name: never worse than without the lookup.

use crate::interp::pyobjects::read_c_string;
use crate::process::memory::Memory;
use gilty_layouts::Layout;

/// `Py_TPFLAGS_TYPE_SUBCLASS` (Include/object.h): set on `type` and every metaclass.
const TPFLAGS_TYPE_SUBCLASS: u64 = 1 << 31;
const MAX_TYPE_NAME: usize = 256;

/// What a code object's first parameter tells about its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstArg {
    /// Not a method (or not recognisable as one): the plain name is used.
    Plain,
    /// `self`: the class is the argument's type.
    Instance,
    /// `cls`: the argument is the class.
    Class,
}

impl FirstArg {
    /// From the code's positional parameter count and first local variable name.
    pub fn of(argcount: i32, first_local: &str) -> FirstArg {
        match (argcount > 0, first_local) {
            (true, "self") => FirstArg::Instance,
            (true, "cls") => FirstArg::Class,
            _ => FirstArg::Plain,
        }
    }
}

/// Class names of methods' first arguments. Nothing is kept by address: a class defined again (or
/// any type freed and another made at its address) must not keep the old name, so the type's flags,
/// name pointer and name are read on every use, through the walk's page cache (`mem`), where the
/// type object and its name usually share a page already read.
#[derive(Default)]
pub struct TypeNames {
    name: String,
}

impl TypeNames {
    /// The class name for a frame whose first argument slot holds `arg`, or None.
    pub fn class_of(
        &mut self,
        mem: &dyn Memory,
        l: &Layout,
        kind: FirstArg,
        arg: u64,
    ) -> Option<&str> {
        if arg == 0 || kind == FirstArg::Plain {
            return None;
        }
        let ob_type = mem.read_u64(arg + l.object_type).ok()?;
        let class = match kind {
            FirstArg::Instance => ob_type,
            _ => {
                // `cls` is only a class if its type is a metaclass.
                let flags = mem.read_u64(ob_type + l.type_flags).ok()?;
                if flags & TPFLAGS_TYPE_SUBCLASS == 0 {
                    return None;
                }
                arg
            }
        };
        let name_ptr = mem.read_u64(class + l.type_name).ok()?;
        self.name = read_c_string(mem, name_ptr, MAX_TYPE_NAME)
            .ok()
            .and_then(|s| bare_class_name(&s))?;
        Some(&self.name)
    }
}

/// `tp_name` is the bare name for classes defined in Python and `module.Name` for static types.
fn bare_class_name(tp_name: &str) -> Option<String> {
    let name = tp_name.rsplit('.').next()?;
    let plausible = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    plausible.then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_argument_kinds() {
        assert_eq!(FirstArg::of(1, "self"), FirstArg::Instance);
        assert_eq!(FirstArg::of(2, "cls"), FirstArg::Class);
        assert_eq!(
            FirstArg::of(0, "self"),
            FirstArg::Plain,
            "a local named self, not a parameter"
        );
        assert_eq!(FirstArg::of(1, "x"), FirstArg::Plain);
    }

    #[test]
    fn class_names() {
        assert_eq!(bare_class_name("Foo").as_deref(), Some("Foo"));
        assert_eq!(
            bare_class_name("collections.OrderedDict").as_deref(),
            Some("OrderedDict")
        );
        assert_eq!(bare_class_name("Классъ").as_deref(), Some("Классъ"));
        assert_eq!(bare_class_name(""), None);
        assert_eq!(bare_class_name("a b"), None);
    }
}
