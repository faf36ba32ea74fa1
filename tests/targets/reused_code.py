"""Code objects, functions and classes freed and created again at the same addresses, all the time.

Each round compiles one of two sources of the same shape (so their objects come from the same
allocator size classes), runs its method for a moment, then drops everything and collects it:
the next round's objects take the freed addresses. A sampler that trusts what it once read at an
address names one round's method after the other's (`Foo.run` in `gen_bravo.py`, or `<module>`).
"""
import gc
import time

# The same size (so the same addresses), the loops at different instructions: `run` loops first and
# never reaches its last three lines; `go1` runs three lines before its loop. A line table kept from
# the other round maps the loop to lines the method never runs (gen_alpha.py lines 5-7).
SOURCES = [
    (
        "gen_alpha.py",
        "class Foo:\n    def run(self, until):\n        while time.perf_counter() < until:\n            pass\n"
        "        a = 1\n        b = 2\n        c = 3\n",
    ),
    (
        "gen_bravo.py",
        "class Bar:\n    def go1(self, until):\n        a = 1\n        b = 2\n        c = 3\n"
        "        while time.perf_counter() < until:\n            pass\n",
    ),
]
# Lines each round's method may be sampled at (the `def` line: a frame not yet started).
LINES = {"gen_alpha.py": ("Foo.run", {2, 3, 4}), "gen_bravo.py": ("Bar.go1", {2, 3, 4, 5, 6, 7})}
ROUND_S = 0.002

print("ready", flush=True)
i = 0
while True:
    file, source = SOURCES[i % 2]
    ns = {"time": time}
    exec(compile(source, file, "exec"), ns)
    cls = ns["Foo"] if "Foo" in ns else ns["Bar"]
    method = getattr(cls(), "run" if "Foo" in ns else "go1")
    method(time.perf_counter() + ROUND_S)  # LINE:call
    del ns, cls, method
    gc.collect()
    i += 1
