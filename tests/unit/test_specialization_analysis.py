"""The specialization analysis on hand-made watch results: estimates, flags, causes, groups, JSON round trip."""

from __future__ import annotations

import json
import os

import pytest
from gilty.report.specialization import json as specialization_json
from gilty.report.specialization import text as specialization_text
from gilty.specialization.analysis import analyse, counter_meaning
from gilty.specialization.session import ProcessWatch, SpecializationSession

RULES_312 = {
    "value_shift": 4,
    "specialized_start": 52,
    "specialized_shift": 4,
    "warmup": 17,
    "quickening_warmup_delay": None,
    "adaptive_start": None,
    "max_backoff": 12,
}
RULES_311 = {
    "value_shift": 4,
    "specialized_start": 53,
    "specialized_shift": 0,
    "warmup": None,
    "quickening_warmup_delay": 8,
    "adaptive_start": (31 << 4) | 5,
    "max_backoff": 12,
}


def ins(offset, name, family, form, samples, history, line=10, value=40, backoff=0, operator=None):
    return {
        "offset": offset,
        "opcode": 1,
        "name": name,
        "oparg": 0,
        "line": line,
        "family": family,
        "form": form,
        "operator": operator,
        "counter": value << 4,
        "counter_value": value,
        "backoff": backoff,
        "misses_since_specialized": (52 - value) if form == "specialized" else None,
        "samples": samples,
        "history": history,
    }


def hist(reads, specs, forms=None, names=None):
    return {
        "reads": reads,
        "forms": forms or {},
        "names": names or {},
        "specializations": specs,
        "counted_misses": 0,
        "changes": 0,
    }


def watch(version, rules, instructions, pid=100):
    return ProcessWatch(
        pid,
        {
            "pid": pid,
            "python_version": version,
            "counter_rules": rules,
            "passes": 1000,
            "thread_samples": 1000,
            "running_samples": 1000,
            "unfollowed_samples": 0,
            "read_passes": 200,
            "idle_read_passes": 0,
            "elapsed_s": 2.0,
            "busy_s": 0.1,
            "codes": [
                {
                    "address": 1,
                    "qualname": "handler",
                    "filename": "/nonexistent/app.py",
                    "firstlineno": 1,
                    "samples": 600,
                    "reads": 200,
                    "gone": False,
                    "instructions": instructions,
                }
            ],
        },
    )


def session(*watches):
    s = SpecializationSession(2.0, 500.0, 0.005)
    s.processes = list(watches)
    return s


def test_two_specializations_half_and_half_miss_half_the_time():
    w = watch("3.12.1", RULES_312, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, hist(200, [100, 100]))])
    site = analyse(session(w)).sites[0]
    assert site.miss_estimate == pytest.approx(0.5)
    assert site.slow_path_estimate == pytest.approx(0.5)
    assert site.missing_while_specialized
    assert "several receiver types" in site.cause


def test_ninety_ten_shares_estimate_eighteen_percent():
    w = watch("3.13.0", RULES_312, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, hist(100, [90, 10]))])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(0.18)


def test_311_cycle_estimate_from_adaptive_share():
    # Two classes alternating on 3.11: specialized by one execution, then 53 misses in 105 executions
    # (52 hits between them), the 53rd leaving it adaptive; 31 deferred executions; the next one
    # specializes. Cycle 137, adaptive after 32 of them, slow in 85 (0.620, as counted in-process).
    f = 32 / 137
    reads = 1370
    h = hist(reads, [round(reads * (1 - f))])
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    site = analyse(session(w)).sites[0]
    assert site.miss_estimate == pytest.approx(53 / 105, abs=0.005)
    assert site.slow_path_estimate == pytest.approx(85 / 137, abs=0.005)
    assert "several receiver types" in site.cause


def test_311_prefers_reads_at_rest():
    # Reads while the code runs find the site adaptive more often (the generic path is slower); reads
    # at rest (no running thread in the code object) give the adaptive share per call boundary.
    h = hist(1000, [700])  # 30 % adaptive over all reads
    h.update(rest_reads=800, rest_specialized=round(800 * (1 - 32 / 137)))
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 137, abs=0.005)
    h.update(rest_reads=50, rest_specialized=50)  # too few at rest: all reads count
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(0.3 * 85 / 32, abs=0.005)


def test_311_reads_aliased_with_the_cycle_are_put_back_on_the_whole_adaptive_run():
    # Four classes in turn fed in calls of 60 on 3.11: cycle 102 (17 hits), so reads between calls
    # meet every 6th execution of it, 17 phases, 6 of them adaptive (counter values 1, 7, ..., 31,
    # as read in-process after each call): 6/17 = 0.353 adaptive instead of 32/102 = 0.314, an
    # estimate of 0.94 for a true 85/102 = 0.833.
    rest = 1700
    h = hist(rest, [rest - 600], forms={"backoff": 600, "specialized": rest - 600})
    h.update(rest_reads=rest, rest_specialized=rest - 600, rest_generic_values={v: 100 for v in range(1, 32, 6)})
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 102, abs=0.005)
    # A few reads off the lattice (the code entered between the sampling pass and the read).
    h.update(rest_specialized=rest - 605, rest_generic_values={**{v: 100 for v in range(1, 32, 6)}, 4: 3, 22: 2})
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 102, abs=0.005)
    # Three classes in calls of 60: cycle 111, every 3rd execution, 11 of 37 phases adaptive.
    h.update(rest_reads=3700, rest_specialized=3700 - 1100, rest_generic_values={v: 100 for v in range(1, 32, 3)})
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 111, abs=0.005)


def test_311_unaliased_or_sparse_reads_are_taken_as_they_are():
    f = 32 / 137
    h = hist(1000, [round(1000 * (1 - f))])
    # Reads that met all but a few of the run's values (a chance gap): no pattern, no correction.
    h.update(
        rest_reads=1000,
        rest_specialized=round(1000 * (1 - f)),
        rest_generic_values={v: 8 for v in range(32) if v not in (5, 17, 18)},
    )
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 137, abs=0.005)
    # Too few adaptive reads to tell a pattern from chance, even if they happen to fall on even values.
    h.update(rest_generic_values={0: 10, 2: 10, 4: 10})
    w = watch("3.11.7", RULES_311, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, h)])
    assert analyse(session(w)).sites[0].slow_path_estimate == pytest.approx(85 / 137, abs=0.005)


def test_monomorphic_is_clean_and_too_few_reads_give_no_estimate():
    w = watch(
        "3.12.1",
        RULES_312,
        [
            ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, hist(200, [200]), value=52),
            ins(30, "LOAD_GLOBAL_MODULE", "LOAD_GLOBAL", "specialized", 5, hist(3, [3]), value=52),
        ],
    )
    a = analyse(session(w))
    mono = next(s for s in a.sites if s.offset == 4)
    assert (mono.slow_path_estimate, mono.cause, mono.missing_while_specialized) == (0.0, "", False)
    few = next(s for s in a.sites if s.offset == 30)
    assert few.slow_path_estimate is None
    assert a.verdict == []


def test_backoff_causes_by_family_and_operator():
    w = watch(
        "3.12.1",
        RULES_312,
        [
            ins(4, "BINARY_OP", "BINARY_OP", "backoff", 50, hist(100, []), value=3000, backoff=12, operator="%"),
            ins(10, "BINARY_OP", "BINARY_OP", "backoff", 80, hist(100, []), value=3000, backoff=12, operator="+"),
            ins(20, "LOAD_ATTR", "LOAD_ATTR", "backoff", 20, hist(100, []), value=7, backoff=3),
        ],
    )
    a = analyse(session(w))
    by_offset = {s.offset: s for s in a.sites}
    assert "operator `%` has no specialization" in by_offset[4].cause
    assert by_offset[10].cause.startswith("mixed operand types")
    assert "cannot be specialized" in by_offset[20].cause
    # Ranked by samples on the slow path: 80, 50, 20.
    assert [s.offset for s in a.sites] == [10, 4, 20]
    assert a.verdict[0].startswith("app.py:10 handler: BINARY_OP runs the generic path (backoff)")
    fam = {g.key: g for g in a.families}
    assert fam["BINARY_OP"].backoff == 2 and fam["BINARY_OP"].specialized_share == 0.0


def test_counter_meaning_per_version():
    spec = {"form": "specialized", "counter_value": 40, "backoff": 0, "misses_since_specialized": 12}
    assert counter_meaning(spec, (3, 12), RULES_312) == "12 misses since (re)specialized; re-specializes after 41 more misses"
    assert "back to adaptive after 40 more" in counter_meaning(spec, (3, 11), RULES_311)
    cold = {"form": "cold", "counter_value": 1, "backoff": 1, "misses_since_specialized": None}
    assert "not quickened" in counter_meaning(cold, (3, 11), RULES_311)
    assert "not executed yet" in counter_meaning(cold, (3, 13), RULES_312)


def test_renderers_and_session_round_trip():
    w = watch("3.12.1", RULES_312, [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, hist(200, [100, 100]))])
    s = session(w)
    doc = json.loads(specialization_json.render(s))
    assert doc["schema"] == "gilty.specialization.report/1"
    assert doc["sites"][0]["missing_while_specialized"] is True
    again = SpecializationSession.from_dict(doc["session"])
    assert again.processes[0].raw == w.raw
    text = specialization_text.render(s)
    assert "Verdict:" in text and "app.py:10 handler: LOAD_ATTR_INSTANCE_VALUE misses ~50%" in text


def test_html_part_carries_the_annotated_source_as_escaped_data(tmp_path):
    src = tmp_path / "app.py"
    src.write_text("def handler(p):\n    x = '</script><b>'\n" + "\n" * 7 + "    return p.x  # hot\n")
    # This process stands for the target: its source is read from it when the run ends, kept in the session.
    w = watch(
        "3.12.1",
        RULES_312,
        [ins(4, "LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR", "specialized", 100, hist(200, [100, 100]))],
        pid=os.getpid(),
    )
    w.raw["codes"][0]["filename"] = str(src)
    w.raw["codes"][0]["qualname"] = "handler</script><b>"
    from gilty.report.specialization import html as specialization_html
    from gilty.specialization.sources import read_sources

    read_sources(session(w))
    src.unlink()  # rendering reads no file
    data = specialization_html.report_data(session(w))
    (fn,) = data["functions"]
    assert fn["qualname"] == "handler</script><b>"
    (line,) = [x for x in fn["lines"] if x["sites"]]
    assert line["text"] == "    return p.x  # hot" and line["sites"][0]["class"] == "missing"
    page = specialization_html.render(session(w))
    # one script element for the data, one for the code: the target's text cannot close either
    assert page.count("<script") == 2 and "</script><b>" not in page
    assert "specialization.js" not in page and "function (" in page  # inlined, no external asset
    assert 'src="' not in page and "http://" not in page.split("<script>", 1)[0]


def test_same_site_in_several_workers_is_one_verdict_line():
    site = lambda: [ins(4, "LOAD_ATTR", "LOAD_ATTR", "backoff", 300, hist(100, []), value=900, backoff=12)]  # noqa: E731
    a = analyse(session(watch("3.12.1", RULES_312, site(), pid=1), watch("3.12.1", RULES_312, site(), pid=2)))
    assert len(a.sites) == 2 and len(a.verdict) == 1
    assert "30.0% of the time spent running Python 2 processes" in a.verdict[0]


# Guards: a call ranked by its callee's time (issue 21: `sock.sendall(data)` first at 11.5 %).
def test_generic_call_is_listed_apart_not_ranked():
    w = watch(
        "3.12.1",
        RULES_312,
        [
            ins(4, "CALL", "CALL", "backoff", 500, hist(100, []), value=900, backoff=12),
            ins(8, "LOAD_ATTR", "LOAD_ATTR", "backoff", 50, hist(100, []), value=900, backoff=12),
        ],
    )
    a = analyse(session(w))
    assert len(a.verdict) == 1 and "LOAD_ATTR" in a.verdict[0] and "CALL" not in a.verdict[0]
    assert len(a.generic_calls) == 1 and "in the callee" in a.generic_calls[0]
    text = specialization_text.render(session(w))
    assert "Calls on the generic path, not ranked" in text


def test_call_specialized_for_a_python_callee_keeps_its_own_time():
    # The callee has its own frame: samples at the call are the call's dispatch.
    w = watch("3.12.1", RULES_312, [ins(4, "CALL_PY_EXACT_ARGS", "CALL", "specialized", 100, hist(100, [50, 50]))])
    site = analyse(session(w)).sites[0]
    assert not site.is_call and site.own_samples == 100 and site.cost > 0


# Guards: "the hot sites stay specialized" concluded from 0 running samples.
def test_nothing_ran_is_said_when_nothing_ran():
    w = watch("3.12.1", RULES_312, [])
    w.raw["running_samples"] = 0
    a = analyse(session(w))
    assert a.nothing_ran and not a.verdict
    text = specialization_text.render(session(w))
    assert "nothing ran" in text and "stay specialized" not in text
    assert json.loads(specialization_json.render(session(w)))["nothing_ran"] is True


def test_opcache_text_for_310():
    doc = {
        "pid": 7,
        "python_version": "3.10.13",
        "samples": 50,
        "codes": [
            {
                "qualname": "hot",
                "filename": "/x/app.py",
                "firstlineno": 3,
                "samples": 40,
                "has_opcache": True,
                "opcache_flag": 1024,
                "entries": 2,
                "sites": [
                    {"offset": 2, "name": "LOAD_ATTR", "line": 4, "state": "deoptimized", "misses_tolerated": None},
                    {"offset": 6, "name": "LOAD_GLOBAL", "line": 4, "state": "active", "misses_tolerated": 1},
                ],
            },
            {
                "qualname": "cold",
                "filename": "/x/app.py",
                "firstlineno": 9,
                "samples": 10,
                "has_opcache": False,
                "opcache_flag": 12,
                "entries": 0,
                "sites": [{"offset": 2, "name": "LOAD_GLOBAL", "line": 10, "state": "no_opcache", "misses_tolerated": None}],
            },
        ],
    }
    text = specialization_text.render_opcache(doc)
    assert "hot (app.py:3), 40 samples: opcache with 2 entries" in text
    assert "no opcache yet (12 calls counted" in text
    assert "1 site(s) deoptimized" in text


def test_free_threaded_build_is_one_line():
    """The native attach refuses a free-threaded build (its _Py_DebugOffsets flag, crates/gilty-layouts);
    `gilty specialization` turns that into one line about specialization. (No free-threaded interpreter
    is installed on the test machine, so the end-to-end path is not run.)"""
    from gilty.specialization.run import one_line_reason

    native = "pid 4242 runs a free-threaded Python 3.13.0 build, which has no GIL to diagnose"
    line = one_line_reason(RuntimeError(native))
    assert line == "pid 4242 runs a free-threaded build: CPython disables specialization there, so there is nothing to report"
    assert "\n" not in line


RULES_314 = {
    "value_shift": 4,
    "specialized_start": 52,
    "specialized_shift": 4,
    "warmup": 17,
    "quickening_warmup_delay": None,
    "adaptive_start": None,
    "max_backoff": 12,
}
RULES_315 = {
    "value_shift": 3,
    "specialized_start": 52,
    "specialized_shift": 3,
    "warmup": 9,
    "quickening_warmup_delay": None,
    "adaptive_start": None,
    "max_backoff": 6,
}


def test_314_cooldown_on_the_generic_opcode_is_said_as_a_retry_without_backoff():
    # 3.14+: an attribute neither the class nor the instance has keeps LOAD_ATTR with the cooldown count.
    retry = {"form": "backoff", "counter_value": 45, "backoff": 0, "misses_since_specialized": None}
    for minor, rules in (((3, 14), RULES_314), ((3, 15), RULES_315)):
        text = counter_meaning(retry, minor, rules)
        assert "next specialization attempt in 45 executions" in text and "every 52" in text, text


def test_314_binary_op_and_call_families():
    for version, rules in (("3.14.10", RULES_314), ("3.15.2", RULES_315)):
        w = watch(
            version,
            rules,
            [
                ins(4, "BINARY_OP", "BINARY_OP", "backoff", 50, hist(100, []), value=3000, backoff=12, operator="%"),
                ins(8, "CALL_KW", "CALL_KW", "backoff", 500, hist(100, []), value=900, backoff=12),
                ins(12, "CALL_KW_PY", "CALL_KW", "specialized", 100, hist(100, [50, 50])),
                ins(16, "CALL_FUNCTION_EX", "CALL_FUNCTION_EX", "backoff", 400, hist(100, []), value=900, backoff=12),
            ],
        )
        by_offset = {s.offset: s for s in analyse(session(w)).sites}
        # 3.14 specializes more than + - * (subscripts, mixed int/float): the cause says so, not "3.11-3.13 only".
        assert "3.11-3.13" not in by_offset[4].cause and "`%`" in by_offset[4].cause, by_offset[4].cause
        # Keyword and *args calls are calls: their samples are the callee's, never ranked...
        assert by_offset[8].is_call and by_offset[8].cost == 0
        assert by_offset[16].is_call and by_offset[16].cost == 0
        # ... unless specialized for a Python callee, which has a frame of its own.
        assert not by_offset[12].is_call and by_offset[12].cost > 0
