"""A Python parent of a process that is not Python and whose executable path is hostile: argv[1] is
a copy of a small program placed in a directory whose name holds ESC, BEL, CR, a newline, C1 and
direction and zero-width characters (/proc/PID/exe names it, and gilty's errors quote it). Prints
"ready", then the child's pid on a line of its own."""
import os
import subprocess
import sys
import threading
import time

child = subprocess.Popen([sys.argv[1], "3600"])
deadline = time.monotonic() + 10
while time.monotonic() < deadline:  # ready once the child runs the copy, not a forked Python
    try:
        if os.readlink(f"/proc/{child.pid}/exe") == sys.argv[1]:
            break
    except OSError:
        pass
    time.sleep(0.01)
print("ready", flush=True)
print(child.pid, flush=True)
try:
    threading.Event().wait()
finally:
    child.kill()
