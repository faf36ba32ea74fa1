"""Two threads running only Python code (austin's two-thread CPU target kind), forever: each appends to
a list (a C method that keeps the GIL) and calls a Python function in a loop. Neither ever runs native
code without the GIL, so every sample of them is holding_gil or waiting_gil."""
import threading


def step(i):
    return i % 1000  # LINE:step


def keep_cpu_busy():
    while True:
        a = []
        for i in range(100_000):
            a.append(i)  # LINE:append
            if step(i) == 0:
                a.append(-i)


threading.Thread(target=keep_cpu_busy, name="second", daemon=True).start()
threading.current_thread().name = "first"
print("ready", flush=True)
keep_cpu_busy()
