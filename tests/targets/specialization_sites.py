"""Hot sites with known specialization behaviour, for `gilty specialization`.

    python specialization_sites.py snapshot OUT.json   warm every site, write what the interpreter itself
                                                      says about them to OUT.json, print "ready", SIGSTOP
    python specialization_sites.py run OUT.json        print "ready" and run the sites forever; OUT.json
                                                      gets the code addresses
    python specialization_sites.py truth ROUNDS        print the true slow-path rate of the polymorphic
                                                      sites, counted in-process execution by execution

The snapshot is the ground truth: `dis.get_instructions(code, adaptive=True)` and the raw
`code._co_code_adaptive` bytes of each hot function, taken after warming and before stopping, so the
stopped process holds exactly these bytes when gilty reads it.
"""

import dis
import json
import os
import signal
import sys


class Plain:
    def __init__(self):
        self.x = 1


class Other:
    def __init__(self):
        self.y = 0
        self.x = 2


class Fallback:
    def __getattr__(self, name):
        return 3


class WithProperty:
    @property
    def p(self):
        return 4


G = 0


def mono_attr(o):
    return o.x  # LINE:mono_attr


def alternating(o):
    return o.x  # LINE:alternating


def mix_90_10(o):
    return o.x  # LINE:mix_90_10


def getattr_fallback(o):
    return o.missing  # LINE:getattr_fallback


def property_read(o):
    return o.p  # LINE:property_read


def int_float(a, b):
    return a + b  # LINE:int_float


def builtin_len(x):
    return len(x)  # LINE:builtin_len


def use_global():
    return G + 1  # LINE:use_global


HOT = [mono_attr, alternating, mix_90_10, getattr_fallback, property_read, int_float, builtin_len, use_global]

plain, other, fallback, with_property = Plain(), Other(), Fallback(), WithProperty()
items = [1, 2, 3]


def one_round(i):
    """Every site once; the polymorphic ones see their mix of receivers."""
    global G
    mono_attr(plain)
    alternating(plain if i % 2 else other)
    mix_90_10(other if i % 10 == 9 else plain)
    getattr_fallback(fallback)
    property_read(with_property)
    int_float(i, 0.5)
    builtin_len(items)
    G = i  # the global keeps being rebound
    use_global()


def snapshot():
    """Raw bytes first, then dis: neither runs the hot functions, so both describe the same state."""
    raw = {f.__name__: f.__code__._co_code_adaptive.hex() for f in HOT}
    out = {}
    for f in HOT:
        out[f.__name__] = {
            "address": id(f.__code__),
            "raw": raw[f.__name__],
            "instructions": [
                {"offset": ins.offset, "opname": ins.opname, "arg": ins.arg}
                for ins in dis.get_instructions(f, adaptive=True)
            ],
        }
    return out


def site_state(f):
    """The bytes of f's attribute site and its inline caches: any change after one execution means
    that execution missed, ran the generic path, or (re)specialized."""
    import opcode

    ice = opcode._inline_cache_entries
    for ins in dis.get_instructions(f, adaptive=True):
        if ins.opname.startswith("LOAD_ATTR"):
            caches = ice["LOAD_ATTR"] if isinstance(ice, dict) else ice[opcode.opmap["LOAD_ATTR"]]
            raw = f.__code__._co_code_adaptive
            return ins.opname, raw[ins.offset : ins.offset + 2 * (1 + caches)]
    raise AssertionError("no LOAD_ATTR site")


def true_slow_rates(rounds):
    """Per polymorphic site, the share of executions that did not hit a specialization in place."""
    for i in range(100):
        one_round(i)
    slow = {"alternating": 0, "mix_90_10": 0}
    before = {name: site_state(globals()[name]) for name in slow}
    for i in range(rounds):
        one_round(i)
        for name in slow:
            now = site_state(globals()[name])
            generic = now[0] == "LOAD_ATTR" or now[0].endswith("_ADAPTIVE")
            slow[name] += generic or now != before[name]
            before[name] = now
    return {name: n / rounds for name, n in slow.items()}


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "truth":
        print(json.dumps(true_slow_rates(int(path))), flush=True)
        return
    if mode == "snapshot":
        rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
        for i in range(rounds):
            one_round(i)
        data = snapshot()
        with open(path, "w") as f:
            json.dump({"pid": os.getpid(), "functions": data}, f)
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    with open(path, "w") as f:
        json.dump({"pid": os.getpid(), "functions": {fn.__name__: {"address": id(fn.__code__)} for fn in HOT}}, f)
    print("ready", flush=True)
    i = 0
    while True:
        one_round(i)
        i += 1


if __name__ == "__main__":
    main()
