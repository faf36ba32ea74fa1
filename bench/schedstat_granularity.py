"""How finely the kernel's per-thread scheduler counters move on this host: a thread spinning on CPU 1
is read every 0.2 ms from CPU 0 for a second; each change of its CPU time is printed with the CPU time,
run-queue delay and switch count added since the last change. `cpu_wait` (crates/gilty-core/src/sampling/cpu_wait.rs)
assumes a running thread's CPU time moves at least every scheduler tick.

    python3 bench/schedstat_granularity.py
"""

import os
import threading
import time


def spin() -> None:
    os.sched_setaffinity(0, {1})
    while True:
        pass


def main() -> None:
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    time.sleep(0.3)
    os.sched_setaffinity(0, {0})
    path = f"/proc/self/task/{thread.native_id}/schedstat"
    prev, changes = None, []
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        now = tuple(map(int, open(path).read().split()))
        if prev is not None and now[0] != prev[0]:
            changes.append((time.monotonic(), now[0] - prev[0], now[1] - prev[1], now[2] - prev[2]))
        prev = now
        time.sleep(0.0002)
    gaps = sorted((b[0] - a[0]) * 1e3 for a, b in zip(changes, changes[1:]))
    print(
        f"CPU time changed {len(changes)} times in 1 s; ms between changes: median {gaps[len(gaps) // 2]:.1f}, max {gaps[-1]:.1f}"
    )
    for _t, run, delay, switches in changes[:10]:
        print(f"  +{run / 1e6:.1f} ms CPU, +{delay / 1e6:.1f} ms delay, +{switches} switches")


if __name__ == "__main__":
    main()
