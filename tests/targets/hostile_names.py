"""A target whose every name is hostile: functions, qualified names, files, modules and threads made of
HTML, script, ANSI escapes, BEL, newlines, right-to-left overrides, zero-width and tag characters,
invalid UTF-8 (a lone surrogate, as Python decodes an undecodable file name) and a 10 kB name. Threads
spin in those functions so a sampler sees them on the stack; the command line (argv) carries the same
bytes.
"""
import sys
import threading
import time
import types

HOSTILE = [
    "</script><img src=x onerror=alert(1)>",
    "<svg onload=alert(2)>&amp;\"'",
    "\x1b[2J\x1b[31mred\x1b]0;owned\x07",
    "bell\x07\x07",
    "new\nline\r\nrow",
    "rtl\u202eevil.py\u202c",
    "c1\x9b31m\x85nel",
    "bad-utf8-\udcff\udcfe",
    "zero\u200bwidth\u200d\u2060join\ufeff",  # shown as nothing: a look-alike of "zerowidthjoin"
    "tag\U000e0041\U000e007fend\ufe0f",
    "long-" + "x" * 10_000,
]


def spin(stop):
    n = 0
    while not stop.is_set():
        n += 1
        if n % 1000 == 0:
            time.sleep(0.001)  # let the other spinners have the GIL too


def renamed(name: str):
    """`spin` with function, qualified name and file all replaced by ``name``."""
    code = spin.__code__
    fields = {"co_name": name, "co_filename": name + ".py"}
    if sys.version_info >= (3, 11):
        fields["co_qualname"] = name + ".<locals>." + name
    return types.FunctionType(code.replace(**fields), {"time": time}, name)


stop = threading.Event()
for name in HOSTILE:
    threading.Thread(target=renamed(name), args=(stop,), name=name, daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
