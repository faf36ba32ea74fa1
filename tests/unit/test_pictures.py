"""What the pictures draw (report/pictures.py): idle left out, a master's identical workers merged,
frame names by base name and told apart when two files share one, a colour for every state name."""

from gilty.report.pictures import FrameNames, PictureOptions, groups, merges, state_colour
from gilty.report.recording import collapsed
from test_console_processes import _recording, _server


def test_workers_merge_by_default_and_on_request_only():
    rec = _server()
    assert merges(rec, None) and merges(rec, PictureOptions())
    assert not merges(rec, PictureOptions(merge_workers=False))
    shown = groups(rec)
    assert [g.role for g in shown] == ["master", "worker"]
    assert [s.target.pid for s in shown[1].sessions] == [101, 102]
    assert shown[1].label.startswith("2 workers of pid 100 · python gunicorn ")  # paths as base names
    assert len(groups(rec, PictureOptions(merge_workers=False))) == 3


def test_merged_workers_add_up_their_threads_and_idle_is_left_out():
    rec = _recording(workers=4, pool=8)
    lines = collapsed.counts(rec)
    # Four workers' MainThreads are one line; the master and the pools were only idle: not drawn.
    assert list(lines) == ["4 workers of pid 100 · gunicorn: master [app];MainThread;holding_gil;handler (/srv/app.py:7)"]
    assert lines[next(iter(lines))] == 4 * 50
    with_idle = collapsed.counts(rec, PictureOptions(idle=True, merge_workers=False))
    assert sum(with_idle.values()) == 50 + 4 * 50 * 9
    assert any(key.startswith("pid 100 · ") and ";idle" in key for key in with_idle)


def test_frame_names_use_base_names_and_tell_same_named_files_apart():
    frames = [
        ("f", "/a/pkg1/__init__.py", 1),
        ("g", "/a/pkg2/__init__.py", 2),
        ("f", "/a/pkg2/__init__.py", 3),
        ("h", "/srv/app/views.py", 9),
    ]
    names = FrameNames(frames)
    assert names.short(frames[3]) == "h (views.py:9)"
    assert names.short(frames[1]) == "g (__init__.py:2)"  # no other `g` in an __init__.py
    assert names.short(frames[0]) == "f (pkg1/__init__.py:1)" and names.short(frames[2]) == "f (pkg2/__init__.py:3)"
    assert names.full(frames[3]) == "h (/srv/app/views.py:9)"


def test_every_state_name_gets_a_colour_new_ones_included():
    held, idle = state_colour("holding_gil"), state_colour("idle")
    r, g, b = (int(x) for x in held[4:-1].split(","))
    assert r > g and r > b  # red: holding the GIL
    r, g, b = (int(x) for x in idle[4:-1].split(","))
    assert max(r, g, b) - min(r, g, b) < 40  # grey: idle
    new = state_colour("waiting_cpu")  # a state a newer sampler may add
    assert new.startswith("rgb(") and new == state_colour("waiting_cpu")


def test_no_lines_makes_a_function_one_frame():
    from gilty.report.pictures import frame_names

    rec = _server()
    with_lines = collapsed.counts(rec, PictureOptions(), frame_names(rec).short)
    without = collapsed.counts(rec, PictureOptions(lines=False), frame_names(rec, PictureOptions(lines=False)).short)
    assert any(k.endswith(";handle (views.py:12)") for k in with_lines)
    assert any(k.endswith(";run (server.py);handle (views.py)") for k in without), list(without)
    assert sum(with_lines.values()) == sum(without.values())
    text = collapsed.render(rec, PictureOptions(lines=False))
    assert "handle (/srv/app/views.py)" in text and ":12)" not in text
