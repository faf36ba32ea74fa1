"""One thread that runs phase_a() for PHASE seconds, then phase_b() for PHASE seconds, then exits.

    python two_phases.py [PHASE]              the main thread does both phases
    python two_phases.py [PHASE] --workers N  a master forks N workers that each do both phases
                                              (started together), and waits for them

Each phase spins in pure Python (holding the GIL), so a recording sees one state throughout and
only the stack tells the phases apart.
"""

import os
import sys
import time


def phase_a(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(2000):
            x += 1  # LINE:phase_a
    return x


def phase_b(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(2000):
            x -= 1  # LINE:phase_b
    return x


def both(seconds):
    phase_a(seconds)
    phase_b(seconds)


if __name__ == "__main__":
    args = sys.argv[1:]
    phase = float(args[0]) if args and not args[0].startswith("--") else 1.5
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 0
    if not workers:
        both(phase)
        sys.exit(0)
    # Give the recorder a moment to see the master before the workers appear.
    time.sleep(0.3)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            both(phase)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
