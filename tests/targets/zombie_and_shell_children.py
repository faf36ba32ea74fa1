"""A busy Python parent with a zombie child (exited, never reaped) and a non-Python child (sleep).

Prints "ready" once the zombie exists; spins in parent_spin() until killed.
"""

import os
import subprocess
import time


def parent_spin():
    x = 0
    while True:
        for _ in range(10000):
            x += 1  # LINE:parent_spin


if __name__ == "__main__":
    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    sleeper = subprocess.Popen(["sleep", "60"])
    while True:  # wait until the child is a zombie (exited, not reaped: we never wait for it)
        with open(f"/proc/{zombie}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    print("ready", flush=True)
    parent_spin()
