"""Started late by late_python_child.sh, as its child: spins until the wrapper is gone."""

import os


def late_spin(ppid):
    x = 0
    while os.getppid() == ppid:
        for _ in range(10000):
            x += 1  # LINE:late_spin


late_spin(os.getppid())
