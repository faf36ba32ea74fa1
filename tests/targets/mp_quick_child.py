"""A multiprocessing parent whose one child is done at once; then the parent works for a while.

Started as `gilty record -s -- python mp_quick_child.py`: at t=0 the command's own interpreter is not
initialised yet, so it must be tried again until it is; the quick child may well be gone before any
pass sees it.
"""
import multiprocessing
import sys
import time


def quick(x):
    return x * 2


def parent_work(until):
    while time.perf_counter() < until:  # LINE:parent_work
        pass


if __name__ == "__main__":
    child = multiprocessing.get_context("fork").Process(target=quick, args=(1,))
    child.start()
    child.join()
    parent_work(time.perf_counter() + float(sys.argv[1] if len(sys.argv) > 1 else 1.5))
