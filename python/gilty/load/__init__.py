"""Load a web service and measure it: open-loop arrivals, coordinated-omission-corrected latency,
a stepped ramp that finds the knee, and Little's law. The generator is native (gilty-load, Rust);
this package plans the steps, runs them, and analyses them."""
