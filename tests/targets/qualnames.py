"""Threads parked in methods of two classes with the same method name, in a classmethod, in a lambda
defined inside a function, and under a list comprehension; each thread named after where it waits."""
import threading
import time

def park():
    event = threading.current_thread().parked
    event.set()
    while True:
        time.sleep(3600)  # LINE:park


class Foo:
    def run(self):
        park()  # LINE:foo_run


class Bar:
    def run(self):
        park()  # LINE:bar_run


class Baz:
    @classmethod
    def create(cls):
        park()  # LINE:baz_create


def main():
    wait = lambda: park()  # LINE:lambda
    wait()  # LINE:main


def comprehension():
    return [park() for _ in range(1)]  # LINE:listcomp


threads = [
    threading.Thread(target=Foo().run, name="foo"),
    threading.Thread(target=Bar().run, name="bar"),
    threading.Thread(target=Baz.create, name="baz"),
    threading.Thread(target=main, name="lambda"),
    threading.Thread(target=comprehension, name="comprehension"),
]
for thread in threads:
    thread.daemon = True
    thread.parked = threading.Event()
    thread.start()
for thread in threads:
    thread.parked.wait()
time.sleep(0.2)
print("ready", flush=True)
threading.Event().wait()
