"""Known variables: thread "locals-thread" sleeps in local_variable_lookup <- caller, whose arguments
and local variables are known exactly (py-spy's locals test, plus *args, **kwargs, keyword-only
arguments, a cell, sets, bytes and cut values). The main thread waits in main_wait."""
import threading
import time

started = threading.Event()


class Opaque:
    pass


def local_variable_lookup(arg1="foo", arg2=None, arg3=True):
    local1 = [-1234, 5678]
    local2 = ("a", "b", "c")
    local3 = 123456789123456789
    local4 = 3.1415
    local5 = {"a": False, "b": (1, 2, 3)}
    local6 = ("-" * 115, {"key": {"key": {"key": "value"}}})
    local7 = "测试1" * 1000
    local8 = ""
    local9 = b"\x00by\"tes"
    local10 = {42}
    local11 = list(range(1000))
    local12 = Opaque()
    local13 = -(2**100)
    local14 = 1.0
    local15 = (7,)
    local16 = frozenset()
    local17 = -7
    local18 = 0
    local19 = False
    started.set()
    while True:
        time.sleep(3600)  # LINE:lookup


def caller(first, *rest, flag=1, **options):
    captured = "in a cell"

    def inner():
        return captured

    local_variable_lookup()  # LINE:caller


def main_wait():
    print("ready", flush=True)
    threading.Event().wait()  # LINE:main_wait


threading.Thread(target=caller, args=(1, 2, 3), kwargs={"flag": 2, "extra": "x"}, name="locals-thread", daemon=True).start()
started.wait()
time.sleep(0.2)
main_wait()
