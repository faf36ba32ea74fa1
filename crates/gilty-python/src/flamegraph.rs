//! `flamegraph_svg`: an SVG flame graph from collapsed stack lines, drawn by inferno.

use inferno::flamegraph::color::{BasicPalette, Palette};
use inferno::flamegraph::{from_lines, Options, TextTruncateDirection};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `lines` are `frame;frame;... count`, outermost frame first; returns the SVG text.
#[pyfunction]
#[pyo3(signature = (lines, title, subtitle = None, count_name = "samples"))]
fn flamegraph_svg(
    py: Python<'_>,
    lines: Vec<String>,
    title: String,
    subtitle: Option<String>,
    count_name: &str,
) -> PyResult<String> {
    let count_name = count_name.to_owned();
    let svg = py.allow_threads(move || {
        let mut opt = Options::default();
        opt.title = title;
        opt.subtitle = subtitle;
        opt.count_name = count_name;
        opt.colors = Palette::Basic(BasicPalette::Hot);
        // Same input, same bytes: colours come from a hash of the name, not a random draw.
        opt.hash = true;
        opt.deterministic = true;
        // Labels are `function (file.py:line)`: cut from the right so the function name stays.
        opt.text_truncate_direction = TextTruncateDirection::Right;
        let mut out = Vec::new();
        from_lines(&mut opt, lines.iter().map(String::as_str), &mut out).map(|_| out)
    });
    let svg =
        svg.map_err(|e| PyValueError::new_err(format!("cannot draw the flame graph: {e}")))?;
    String::from_utf8(svg)
        .map_err(|e| PyValueError::new_err(format!("flame graph is not UTF-8: {e}")))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(flamegraph_svg, m)?)
}
