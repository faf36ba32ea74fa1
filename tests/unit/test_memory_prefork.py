"""gilty.memory.prefork: the freeze pattern's hooks, run in fresh interpreters (they change GC state and
exit paths): disable early, collect once and freeze before fork, re-enable in the child; the
threshold-0 variant; the fast exit; the gunicorn and uWSGI modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gilty.memory import prefork

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def run_py(code: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    for var in list(full_env):
        if var.startswith("GILTY_PREFORK_"):
            del full_env[var]
    full_env.update(env or {})
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def last_json(done: subprocess.CompletedProcess):
    return json.loads(done.stdout.strip().splitlines()[-1])


# Guards: the child not getting GC back, the parent collecting again at every fork, garbage frozen.
def test_fork_hooks_freeze_once_and_reenable_in_the_child():
    done = run_py(
        """
        import gc, json, os
        from gilty.memory import prefork
        prefork.install_fork_hooks()
        assert not gc.isenabled()
        junk = []
        junk.append(junk)  # a cycle: garbage the first freeze must not keep
        del junk
        data = [[i] for i in range(10000)]
        results = []
        for _ in range(2):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                s = prefork.status()
                os.write(w, json.dumps([gc.isenabled(), gc.get_threshold(), gc.get_freeze_count(), s["is_master"]]).encode())
                os._exit(0)
            os.close(w)
            results.append(json.loads(os.read(r, 4096)))
            os.waitpid(pid, 0)
        s = prefork.status()
        print(json.dumps({"children": results, "parent_enabled": gc.isenabled(), "collected": s["collected_before_freeze"],
                          "freezes": s["freezes"]}))
        """
    )
    out = last_json(done)
    for enabled, thresholds, frozen, is_master in out["children"]:
        assert enabled is True and thresholds == [700, 10, 10]
        assert frozen >= 10000 and is_master is False
    assert out["parent_enabled"] is False
    assert out["collected"] >= 1  # the cycle was collected before the first freeze
    assert out["freezes"] == 2


# Guards: a library's gc.enable() undoing the protection (msgpack at Instagram).
def test_threshold0_survives_gc_enable():
    done = run_py(
        """
        import gc, json
        from gilty.memory import prefork
        prefork.master_start(prefork.PreforkOptions(mode="threshold0"))
        gc.enable()  # what msgpack did
        before = gc.get_threshold()
        prefork.after_fork_in_child()
        print(json.dumps([before, gc.get_threshold(), gc.isenabled()]))
        """
    )
    before, after, enabled = last_json(done)
    assert before[0] == 0 and after == [700, 10, 10] and enabled is True


def test_options_from_env():
    o = prefork.options_from_env({"GILTY_PREFORK_GC": "threshold0", "GILTY_PREFORK_FAST_EXIT": "1", "GILTY_PREFORK_COLLECT": "0"})
    assert o == prefork.PreforkOptions(mode="threshold0", collect_before_freeze=False, fast_exit=True)
    assert prefork.options_from_env({}) == prefork.PreforkOptions()
    with pytest.raises(ValueError):
        prefork.options_from_env({"GILTY_PREFORK_GC": "off"})
    with pytest.raises(ValueError):
        prefork.PreforkOptions(mode="never")


FAST_EXIT_CHILD = """
    import atexit, os, sys
    # Registered before the hooks: runs after the fast exit's handler, so only without it (this
    # stands for what interpreter finalisation would do after the handlers).
    PARENT = os.getpid()
    atexit.register(lambda: os.getpid() != PARENT and open({marker!r} + ".late", "w").write("x"))
    from gilty.memory import prefork
    prefork.install_fork_hooks(prefork.PreforkOptions(fast_exit={fast}))
    pid = os.fork()
    if pid == 0:
        atexit.register(lambda: open({marker!r} + ".atexit", "w").write("x"))
        sys.stdout.write("unflushed")
        {ending}
    else:
        _, status = os.waitpid(pid, 0)
        print()
        print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize(
    "fast, ending, status, skipped",
    [
        (True, "sys.exit(3)", 3, True),
        (True, "raise RuntimeError('boom')", 1, True),
        (True, "pass", 0, True),
        (False, "sys.exit(3)", 3, False),
    ],
    ids=["fast-sys.exit(3)", "fast-uncaught", "fast-normal", "normal-sys.exit(3)"],
)
def test_fast_exit_runs_atexit_keeps_status_and_leaves(tmp_path, fast, ending, status, skipped):
    marker = str(tmp_path / "m")
    done = run_py(FAST_EXIT_CHILD.format(fast=fast, marker=marker, ending=ending), check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert int(lines[-1]) == status
    assert "unflushed" in done.stdout, "the child's buffered output must be flushed"
    assert Path(marker + ".atexit").exists(), "the application's atexit handlers must still run"
    assert Path(marker + ".late").exists() != skipped


# Guards: `-c python:gilty.memory.prefork.gunicorn` not stopping GC at import, hooks with the wrong arity.
def test_gunicorn_config_module():
    done = run_py(
        """
        import gc, inspect, json
        import gilty.memory.prefork.gunicorn as conf
        master_gc = gc.get_threshold()

        class Log:
            lines = []
            def info(self, msg, *a): self.lines.append(msg % a)
            def warning(self, msg, *a): self.lines.append("WARN " + msg % a)

        class Cfg:
            preload_app = False

        class Server:
            log = Log()
            cfg = Cfg()

        data = [[i] for i in range(5000)]
        conf.pre_fork(Server(), None)
        conf.pre_fork(Server(), None)
        conf.post_fork(Server(), None)
        print(json.dumps({"master_gc": master_gc, "child": [gc.isenabled(), gc.get_threshold()],
                          "arity": [len(inspect.signature(f).parameters) for f in (conf.pre_fork, conf.post_fork)],
                          "log": Server.log.lines}))
        """,
        env={"GILTY_PREFORK_GC": "threshold0"},
    )
    out = last_json(done)
    assert out["master_gc"][0] == 0
    assert out["child"] == [True, [700, 10, 10]]
    assert out["arity"] == [2, 2]
    froze = [line for line in out["log"] if "froze" in line]
    assert len(froze) == 1 and "GC mode threshold0" in froze[0]
    assert sum("--preload is off" in line for line in out["log"]) == 1


def test_uwsgi_module_uses_the_post_fork_hook():
    done = run_py(
        """
        import gc, json, sys, types
        fake = types.ModuleType("uwsgi")
        calls = []
        fake.post_fork_hook = lambda: calls.append("previous")
        sys.modules["uwsgi"] = fake
        import gilty.memory.prefork.uwsgi as hooks
        disabled = not gc.isenabled()
        data = [[i] for i in range(5000)]
        hooks.freeze()
        frozen = gc.get_freeze_count()
        fake.post_fork_hook()  # what uWSGI calls in each worker
        print(json.dumps([hooks.CHILD_HOOK, disabled, frozen, gc.isenabled(), calls]))
        """
    )
    hook, disabled, frozen, enabled, calls = last_json(done)
    assert hook == "uwsgi.post_fork_hook" and disabled and frozen >= 5000 and enabled and calls == ["previous"]


# Guards: the hooks not reaching multiprocessing's "fork" start method (it forks through os.fork).
def test_multiprocessing_fork_children_get_gc_back():
    done = run_py(
        """
        import gc, json, multiprocessing as mp
        from gilty.memory import prefork
        prefork.install_fork_hooks()
        data = [[i] for i in range(5000)]

        def report(q):
            q.put([gc.isenabled(), gc.get_freeze_count()])

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=report, args=(q,))
            p.start()
            child = q.get(timeout=30)
            p.join(30)
            print(json.dumps([child, gc.isenabled(), p.exitcode]))
        """
    )
    (enabled, frozen), parent_enabled, exitcode = last_json(done)
    assert enabled is True and frozen >= 5000 and parent_enabled is False and exitcode == 0
