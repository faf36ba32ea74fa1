"""A module frame held at its first instruction: a trace function stops in the "call" event of the
code compiled as "<held>", which fires from the module's RESUME, before any of its lines runs."""
import sys
import threading


def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == "<held>":
        print("ready", flush=True)
        threading.Event().wait()
    return None


sys.settrace(tracer)
exec(compile("import os\nx = 1\n", "<held>", "exec"))
