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


class Third:
    def __init__(self):
        self.z = 0
        self.w = 0
        self.x = 3


class Fourth:
    def __init__(self):
        self.v = 0
        self.z = 0
        self.w = 0
        self.x = 4


class Fallback:
    def __getattr__(self, name):
        return 3


class WithProperty:
    @property
    def p(self):
        return 4


class Modified:
    """A class whose attribute the loop keeps assigning: each assignment changes its type version."""

    version = 0

    def __init__(self):
        self.x = 1


G = 0


# Each hot function runs its site over a whole batch, so samples find it quickly; the batch's loop
# (FOR_ITER over a list, int += int) specializes cleanly and adds no misses of its own.
def mono_attr(objs):
    t = 0
    for o in objs:
        t += o.x  # LINE:mono_attr
    return t


def alternating(objs):
    t = 0
    for o in objs:
        t += o.x  # LINE:alternating
    return t


def mix_90_10(objs):
    t = 0
    for o in objs:
        t += o.x  # LINE:mix_90_10
    return t


def rotate_three(objs):
    t = 0
    for o in objs:
        t += o.x  # LINE:rotate_three
    return t


def rotate_four(objs):
    t = 0
    for o in objs:
        t += o.x  # LINE:rotate_four
    return t


def getattr_fallback(objs):
    t = 0
    for o in objs:
        t += o.missing  # LINE:getattr_fallback
    return t


def property_read(objs):
    t = 0
    for o in objs:
        t += o.p  # LINE:property_read
    return t


def int_float(ints):
    t = 0.0
    for a in ints:
        t = a + 0.5  # LINE:int_float
    return t


def builtin_len(lists):
    t = 0
    for x in lists:
        t += len(x)  # LINE:builtin_len
    return t


def use_global(ints):
    global G
    t = 0
    for i in ints:
        G = i  # the global keeps being rebound
        t += G  # LINE:use_global
    return t


def class_modified(objs):
    t = 0
    for o in objs:
        Modified.version = t  # modifies the class at run time
        t += o.x  # LINE:class_modified
    return t


HOT = [mono_attr, alternating, mix_90_10, rotate_three, rotate_four, getattr_fallback, property_read, int_float, builtin_len, use_global,
       class_modified]

plain, other, third, fourth = Plain(), Other(), Third(), Fourth()
fallback, with_property, modified = Fallback(), WithProperty(), Modified()
BATCH = 60
# The 90/10 mix runs in windows of 61 that continue its 10-long pattern from call to call. With calls
# of 60, every call would end at the same few points of 3.11's de-specialization cycle (560
# executions, a multiple of the pattern), and reads landing between calls would see only those points.
MIX_WINDOW = 61
MIX = ([plain] * 9 + [other]) * MIX_WINDOW
BATCHES = {
    mono_attr: [plain] * BATCH,
    alternating: [plain, other] * (BATCH // 2),
    mix_90_10: MIX,
    # Three and four receiver classes in turn, the attribute at a different instance-values slot in each.
    rotate_three: [plain, other, third] * (BATCH // 3),
    rotate_four: [plain, other, third, fourth] * (BATCH // 4),
    getattr_fallback: [fallback] * BATCH,
    property_read: [with_property] * BATCH,
    int_float: list(range(BATCH)),
    builtin_len: [[1, 2, 3]] * BATCH,
    use_global: list(range(BATCH)),
    class_modified: [modified] * BATCH,
}


_mix_at = 0


def one_round():
    """Every site over its batch; the polymorphic ones see their mix of receivers."""
    global _mix_at
    for f, batch in BATCHES.items():
        if f is mix_90_10:
            f(batch[_mix_at : _mix_at + MIX_WINDOW])
            _mix_at = (_mix_at + MIX_WINDOW) % len(MIX)
        else:
            f(batch)


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
            # A list by opcode (3.12), a dict by name (3.13/3.14), a frozendict by name (3.15).
            caches = ice["LOAD_ATTR"] if hasattr(ice, "keys") else ice[opcode.opmap["LOAD_ATTR"]]
            raw = f.__code__._co_code_adaptive
            return ins.opname, raw[ins.offset : ins.offset + 2 * (1 + caches)]
    raise AssertionError("no LOAD_ATTR site")


POLYMORPHIC = (alternating, mix_90_10, rotate_three, rotate_four)


def true_slow_rates(executions):
    """Per polymorphic site, the share of executions that did not hit a specialization in place: the
    site's batch fed one receiver per call, its state read after each."""
    out = {}
    for f in POLYMORPHIC:
        batch = BATCHES[f]
        for i in range(100):
            f(batch[i % len(batch) : i % len(batch) + 1])
        slow = 0
        before = site_state(f)
        for i in range(executions):
            f(batch[i % len(batch) : i % len(batch) + 1])
            now = site_state(f)
            generic = now[0] == "LOAD_ATTR" or now[0].endswith("_ADAPTIVE")
            slow += generic or now != before
            before = now
        out[f.__name__] = slow / executions
    return out


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "truth":
        print(json.dumps(true_slow_rates(int(path))), flush=True)
        return
    if mode == "snapshot":
        rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
        for _ in range(rounds):
            one_round()
        data = snapshot()
        with open(path, "w") as f:
            json.dump({"pid": os.getpid(), "functions": data}, f)
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    with open(path, "w") as f:
        json.dump({"pid": os.getpid(), "functions": {fn.__name__: {"address": id(fn.__code__)} for fn in HOT}}, f)
    print("ready", flush=True)
    while True:
        one_round()


if __name__ == "__main__":
    main()
