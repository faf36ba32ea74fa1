"""Known stacks: thread "stack-thread" blocks in level_three <- level_two <- level_one, the main thread in main_wait."""
import threading
import time


def level_three(started):
    started.set()
    while True:
        time.sleep(3600)  # LINE:level_three


def level_two(started):
    level_three(started)  # LINE:level_two


def level_one(started):
    level_two(started)  # LINE:level_one


def main_wait():
    print("ready", flush=True)
    threading.Event().wait()  # LINE:main_wait


started = threading.Event()
threading.Thread(target=level_one, args=(started,), name="stack-thread", daemon=True).start()
started.wait()
time.sleep(0.2)
main_wait()  # LINE:module
