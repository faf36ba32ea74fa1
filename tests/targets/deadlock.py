"""A deadlock: the main thread holds lock_a and waits for lock_b, thread "other" holds lock_b and waits
for lock_a. Prints "ready" once both hold their first lock (the second acquire follows at once)."""

import threading

lock_a = threading.Lock()
lock_b = threading.Lock()
both_hold = threading.Barrier(2)


def other_side():
    with lock_b:
        both_hold.wait()
        with lock_a:  # LINE:other_waits
            pass


def main_side():
    with lock_a:
        both_hold.wait()
        print("ready", flush=True)
        with lock_b:  # LINE:main_waits
            pass


threading.Thread(target=other_side, name="other", daemon=True).start()
main_side()
