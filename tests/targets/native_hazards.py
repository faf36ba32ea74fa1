"""Hazards for native stacks. argv: the directory holding the built native_chain extension (for
"dlclose": a copy of it is loaded and unloaded), then the mode:
- dlclose: thread "loader" loads a shared library with ctypes, calls into it, unloads it (dlclose), forever;
- threads: threads that each run the C chain briefly and exit, started one after another, forever;
- anon: thread "anon" runs machine code in an anonymous executable mapping (a jump to itself), forever.
The main thread sleeps. Prints "ready" once the hazard runs."""

import ctypes
import glob
import mmap
import os
import shutil
import sys
import tempfile
import threading
import time

ext_dir, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, ext_dir)
import native_chain  # noqa: E402

started = threading.Event()


def loader():
    import _ctypes

    src = glob.glob(os.path.join(ext_dir, "native_chain*.so"))[0]
    copy = os.path.join(tempfile.mkdtemp(prefix="gilty-dlclose-"), "libunloaded.so")
    shutil.copy(src, copy)
    while True:
        lib = ctypes.PyDLL(copy)
        started.set()
        lib.PyInit_native_chain  # resolve a symbol: the library is really mapped
        native_chain.outer(200_000, True)  # LINE:loaded
        _ctypes.dlclose(lib._handle)


def short_lived():
    native_chain.outer(100_000, True)


def spawner():
    while True:
        t = threading.Thread(target=short_lived, name="short")
        t.start()
        started.set()
        t.join()


def anon():
    m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(b"\xeb\xfe")  # jmp . (spins for ever, with the GIL released by ctypes)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    func = ctypes.CFUNCTYPE(None)(addr)
    started.set()
    func()  # LINE:anon


target = {"dlclose": loader, "threads": spawner, "anon": anon}[mode]
threading.Thread(target=target, name=mode, daemon=True).start()
started.wait()
time.sleep(0.05)
print("ready", flush=True)
while True:
    time.sleep(1)
