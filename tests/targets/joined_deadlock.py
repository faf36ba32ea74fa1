"""Threads "one" and "two" deadlock on two locks (RLocks with the argument "rlock", else Locks) while the
main thread joins them. Prints "ready" once both are started."""

import sys
import threading

kind = threading.RLock if sys.argv[1:] == ["rlock"] else threading.Lock
lock_a, lock_b = kind(), kind()
both_hold = threading.Barrier(2)


def one():
    with lock_a:
        both_hold.wait()
        with lock_b:  # LINE:one_waits
            pass


def two():
    with lock_b:
        both_hold.wait()
        with lock_a:  # LINE:two_waits
            pass


threads = [threading.Thread(target=one, name="one"), threading.Thread(target=two, name="two")]
for t in threads:
    t.start()
print("ready", flush=True)
for t in threads:
    t.join()  # LINE:join
