"""Time per source line by state (gilty.sampling.analysis.lines) and the HTML source view built on it
(gilty.report.recording.source_view): self on the innermost frame's line, total on every line of the
stack once, ranking by self time without idle, the shown window, saved sources and hostile text."""

from __future__ import annotations

from gilty import report
from gilty.report.recording import html as html_report
from gilty.report.recording.source_view import NO_FILE, NOT_KEPT, view_data
from gilty.sampling.analysis.lines import CONTEXT, hot_functions, line_times
from gilty.sampling.session import Recording, Session
from recordings import HOSTILE
from synthetic import CPU_WAIT, HOLD, IDLE, WAIT, BatchBuilder, make_session
from test_report_html import embedded_data

APP = "/srv/app.py"


def recursion_session() -> Session:
    """'worker' holds the GIL in work() at line 12 (called from line 30 of main) 60 passes, waits for
    it at line 13 20 passes, waits for a CPU at 12 10 passes; work() calls itself at line 14 for 10
    of its holds. 'sleeper' idles in nap() at line 40, under main at line 31, all 100."""
    b = BatchBuilder(names={1: "worker", 2: "sleeper"})
    hot = b.stack(("work", APP, 12), ("main", APP, 30))
    waits = b.stack(("work", APP, 13), ("main", APP, 30))
    deep = b.stack(("work", APP, 12), ("work", APP, 14), ("main", APP, 30))
    nap = b.stack(("nap", APP, 40), ("main", APP, 31))
    passes = []
    for i in range(100):
        if i < 50:
            one = (HOLD, hot)
        elif i < 60:
            one = (HOLD, deep)
        elif i < 80:
            one = (WAIT, waits)
        elif i < 90:
            one = (CPU_WAIT, hot)
        else:
            one = (HOLD, hot)
        passes.append({1: one, 2: (IDLE, nap)})
    return make_session([b.batch(passes)])


def test_self_is_the_innermost_line_and_total_every_line_of_the_stack_once():
    times = line_times([recursion_session()])
    work = times[("work", APP)]
    # line 12: 50 + 10 (deep) + 10 (tail) holds, 10 cpu_wait; a recursive sample counts once
    assert work.lines[12].self[HOLD] == 70 and work.lines[12].self[CPU_WAIT] == 10
    assert work.lines[12].total[HOLD] == 70
    assert work.lines[13].self[WAIT] == 20 and work.lines[13].total[WAIT] == 20
    # the recursive call's line is on the stack (total), never where the thread stood (self)
    assert sum(work.lines[14].self) == 0 and work.lines[14].total[HOLD] == 10
    assert work.self[HOLD] == 70 and work.total[HOLD] == 70  # the function once per sample too
    main = times[("main", APP)]
    assert sum(main.self) == 0 and main.lines[30].total == [70, 0, 20, 0, 0, 0, 10]
    assert main.lines[31].total[IDLE] == 100
    assert times[("nap", APP)].lines[40].self[IDLE] == 100


def test_hot_functions_rank_by_self_time_without_idle_unless_asked():
    times = line_times([recursion_session()])
    assert [(f.function) for f in hot_functions(times, 5)] == ["work"]  # nap is idle only, main has no self
    assert [f.function for f in hot_functions(times, 5, idle=True)] == ["nap", "work"]  # 100 idle > 90
    assert hot_functions(times, 0) == []
    assert times[("work", APP)].hottest((HOLD, WAIT, CPU_WAIT)) == [12, 13]


def test_the_view_shows_sampled_lines_with_their_context_in_file_order():
    times = line_times([recursion_session()])
    work = times[("work", APP)]
    assert work.shown_lines() == list(range(12 - CONTEXT, 14 + CONTEXT + 1))
    far = make_session([_far_batch()])
    shown = line_times([far])[("f", APP)].shown_lines()
    assert shown == [*range(1, 2 + CONTEXT + 1), *range(500 - CONTEXT, 500 + CONTEXT + 1)]  # from line 1


def _far_batch():
    b = BatchBuilder(names={1: "t"})
    near, far = b.stack(("f", APP, 2)), b.stack(("f", APP, 500))
    return b.batch([{1: (HOLD, near if i % 2 else far)} for i in range(10)])


def test_native_frames_and_stackless_samples_have_no_line():
    b = BatchBuilder(names={1: "t"})
    stack = b.stack(("memcpy", "libc.so.6", -2 - 0x40), ("copy", APP, 8))
    session = make_session([b.batch([{1: (HOLD, stack)}, {1: (IDLE, -1)}])])
    times = line_times([session])
    assert set(times) == {("copy", APP)}
    # the C frame is left out: the Python frame under it is where the thread was in Python
    assert times[("copy", APP)].lines[8].self[HOLD] == 1


def test_view_data_carries_the_kept_text_and_says_why_text_is_missing():
    session = recursion_session()
    rec = Recording.of(session)
    view = view_data(rec)
    (work,) = view["functions"]
    assert work["not_shown"] == NOT_KEPT and all(row[1] is None for row in work["lines"])
    session.sources = {APP: {"lines": {str(n): f"line {n}" for n in range(9, 18)}, "not_shown": ""}}
    work = view_data(rec)["functions"][0]
    assert work["not_shown"] == "" and work["hottest"] == [12, 13]
    row = {r[0]: r for r in work["lines"]}[12]
    assert row[1] == "line 12" and row[2][HOLD] == 70 and row[3][HOLD] == 70
    session.sources = {"<string>": {"lines": {}, "not_shown": ""}, APP: {"lines": {}, "not_shown": "not a regular file"}}
    assert view_data(rec)["functions"][0]["not_shown"] == "not a regular file"
    assert NO_FILE  # the wording for "<string>" names


def test_sources_survive_a_save_and_bad_ones_are_refused():
    session = recursion_session()
    session.sources = {APP: {"lines": {"12": "    x += 1"}, "not_shown": ""}}
    again = Session.from_dict(session.to_dict())
    assert again.sources == session.sources
    data = session.to_dict()
    for bad in ({APP: {"lines": {"12": 5}}}, {APP: {"lines": {"x": "a"}}}, {APP: []}, ["a"], {APP: {"lines": {"¹": "a"}}}):
        data["sources"] = bad
        try:
            Session.from_dict(data)
        except ValueError as e:
            assert "sources" in str(e)
        else:
            raise AssertionError(f"accepted {bad!r}")


def test_the_page_escapes_hostile_source_text_and_file_names():
    b = BatchBuilder(names={1: "t"})
    evil_file = "evil\u202e<file>.py"
    stack = b.stack((HOSTILE, evil_file, 2))
    session = make_session([b.batch([{1: (HOLD, stack)} for _ in range(10)])])
    session.sources = {evil_file: {"lines": {"1": "a", "2": "</script><img src=x>\x1b[2J\ttab\u202e", "3": "b"}, "not_shown": ""}}
    page = report.render(Recording.of(session), "html")
    assert "<img" not in page and "\x1b" not in page and "\u202e" not in page
    view = embedded_data(page)["source_view"]
    (f,) = view["functions"]
    assert f["function"] == HOSTILE and f["file"] == "evil\\u202e<file>.py"
    assert {r[0]: r[1] for r in f["lines"]}[
        2
    ] == "</script><img src=x>\\x1b[2J" + " " * 8 + "tab\\u202e"  # tab to column 32, then ESC written out


def test_the_page_has_no_source_view_without_python_lines_or_when_asked_for_none():
    from gilty.report.pictures import PictureOptions

    b = BatchBuilder(names={1: "t"})
    session = make_session([b.batch([{1: (IDLE, -1)} for _ in range(5)])])
    assert embedded_data(html_report.render(Recording.of(session)))["source_view"] is None
    page = html_report.render(Recording.of(recursion_session()), options=PictureOptions(source_functions=0))
    assert embedded_data(page)["source_view"] is None


def test_a_function_with_a_sliver_of_the_time_is_not_one_that_matters():
    b = BatchBuilder(names={1: "t"})
    hot, stray = b.stack(("hot", APP, 5)), b.stack(("_find_and_load", "<frozen importlib._bootstrap>", 1))
    session = make_session([b.batch([{1: (HOLD, stray if i == 0 else hot)} for i in range(300)])])
    assert [f.function for f in hot_functions(line_times([session]))] == ["hot"]  # 1 of 300 < 0.5 %
