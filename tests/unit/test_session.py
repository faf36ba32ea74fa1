"""Session: merging batches into flat columns, and saving/loading them."""

from gilty.sampling.session import NO_STACK, NO_SYSCALL, Session
from synthetic import CLOCK_NANOSLEEP, FUTEX, HOLD, IDLE, WAIT, BatchBuilder, make_session


def test_batches_merge_with_pass_indices_offset():
    b = BatchBuilder(names={1: "main", 2: "worker"})
    s1 = b.stack(("f", "a.py", 1))
    first = b.batch([{1: HOLD, 2: WAIT}, {1: (HOLD, s1)}])
    second = b.batch([{2: (HOLD, s1)}, {1: WAIT, 2: HOLD}, {1: HOLD}], errors={"torn_dropped": 2}, late=3)
    session = make_session([first, second])

    assert session.samples == 5
    assert session.runs() == [
        (1, 0, 2, HOLD, NO_STACK, NO_SYSCALL),
        (1, 3, 1, WAIT, NO_STACK, NO_SYSCALL),
        (1, 4, 1, HOLD, NO_STACK, NO_SYSCALL),
        (2, 0, 1, WAIT, NO_STACK, NO_SYSCALL),
        (2, 2, 2, HOLD, s1, NO_SYSCALL),
    ]
    assert sum(session.stack_counts().values()) == 7
    assert session.errors == {"torn_retried": 0, "torn_dropped": 2, "torn_partial": 0, "read_failed": 0, "late": 3}
    # The stack was sent once, in the first batch, and stays resolvable for later samples.
    assert second["stacks"] == {}
    assert session.innermost_frame(s1) == ("f", "a.py", 1)
    assert session.thread_name(2) == "worker"
    assert session.thread_name(99) == "tid 99"


def test_a_run_going_on_across_batches_is_merged_once():
    b = BatchBuilder()
    batches = [
        b.batch([{1: IDLE, 2: HOLD}, {1: IDLE, 2: HOLD}]),
        b.batch([{1: IDLE}, {1: IDLE, 2: HOLD}]),  # 2 is absent from pass 2: its run does not go on
        b.batch([]),  # a batch without passes (every read failed) does not cut a run
        b.batch([{1: IDLE, 2: HOLD}]),
        b.batch([{1: (IDLE, NO_STACK, FUTEX), 2: HOLD}]),  # a new syscall starts a new run
    ]
    session = make_session(batches)
    assert session.runs() == [
        (1, 0, 5, IDLE, NO_STACK, NO_SYSCALL),
        (1, 5, 1, IDLE, NO_STACK, FUTEX),
        (2, 0, 2, HOLD, NO_STACK, NO_SYSCALL),
        (2, 3, 3, HOLD, NO_STACK, NO_SYSCALL),
    ]
    # Whatever the batch boundaries, the runs are those of one batch holding every pass.
    passes = [{1: IDLE, 2: HOLD}, {1: IDLE, 2: HOLD}, {1: IDLE}, {1: IDLE, 2: HOLD}, {1: IDLE, 2: HOLD}]
    passes.append({1: (IDLE, NO_STACK, FUTEX), 2: HOLD})
    assert make_session([BatchBuilder().batch(passes)]).runs() == session.runs()


def test_syscall_names_are_resolved_once_and_kept():
    b = BatchBuilder()
    calls = []

    def name(nr):
        calls.append(nr)
        return {FUTEX: "futex", CLOCK_NANOSLEEP: "clock_nanosleep"}[nr]

    session = make_session([])
    session.add_batch(b.batch([{1: (IDLE, -1, FUTEX)}, {1: (IDLE, -1, CLOCK_NANOSLEEP)}]), name)
    session.add_batch(b.batch([{1: (IDLE, -1, FUTEX)}]), name)
    assert sorted(calls) == [FUTEX, CLOCK_NANOSLEEP]
    assert session.syscall_label(FUTEX) == "futex"
    assert session.syscall_label(-1) == "unknown"
    assert session.syscall_label(999) == "syscall_999"


def test_exited_sticks_once_seen():
    b = BatchBuilder()
    session = make_session([b.batch([{1: HOLD}], exited=True)])
    session.add_batch(b.batch([]))
    assert session.exited


def test_duration_defaults_to_span_of_samples():
    b = BatchBuilder(rate_hz=100)
    session = make_session([b.batch([{1: HOLD}] * 10)])
    assert abs(session.duration_s - 0.1) < 1e-9
    session.duration_s = 2.5
    assert session.duration_s == 2.5


def test_window_shares_tables_but_not_rows():
    b = BatchBuilder()
    s1 = b.stack(("f", "a.py", 1))
    session = make_session([b.batch([{1: (HOLD, s1)}])])
    window = session.window()
    window.add_batch(b.batch([{1: (HOLD, s1)}]))  # stack not resent: only the shared table has it
    assert window.samples == 1 and session.samples == 1
    assert window.runs() == [(1, 0, 1, HOLD, s1, NO_SYSCALL)]
    assert window.innermost_frame(s1) == ("f", "a.py", 1)


def test_save_and_load_round_trip(tmp_path):
    b = BatchBuilder(names={1: "main"})
    s1 = b.stack(("f", "a.py", 1), ("g", "b.py", 2))
    session = make_session([b.batch([{1: (HOLD, s1)}, {1: (IDLE, s1, FUTEX)}])])
    session.mark_partial("pid 4242 exited after 0.1 s of the requested 5 s")
    session.command = ["python", "app.py"]
    path = tmp_path / "session.json"
    session.save(str(path))
    loaded = Session.load(str(path))
    assert loaded.runs() == session.runs()
    assert loaded.stack_counts() == session.stack_counts()
    assert loaded.blame == session.blame and loaded.pass_flags == session.pass_flags
    assert loaded.held_cpu_wait == session.held_cpu_wait
    assert list(loaded.times) == list(session.times)
    assert loaded.innermost_frame(s1) == ("f", "a.py", 1)
    assert loaded.thread_names == {1: "main"}
    assert loaded.syscall_label(FUTEX) == "futex"
    assert loaded.partial and loaded.partial_reason == session.partial_reason
    assert loaded.target == session.target


def test_runs_parsed_into_arrays_load_the_same_and_bad_values_are_still_refused():
    import json

    import pytest
    from gilty.sampling.session import compact_runs

    b = BatchBuilder(names={1: "main", 2: "worker"})
    s1 = b.stack(("f", "a.py", 1))
    session = make_session([b.batch([{1: (HOLD, s1), 2: WAIT}, {1: (IDLE, s1, FUTEX)}, {2: HOLD}])])
    text = json.dumps(session.to_dict())
    loaded = Session.from_dict(json.loads(text, object_hook=compact_runs))
    assert loaded.runs() == session.runs()
    assert json.dumps(loaded.to_dict()) == text
    # A state that no array of bytes holds is left as parsed, refused on loading as before (the
    # CLI says either in one line).
    data = json.loads(text.replace('"state": [', '"state": [300, ', 1), object_hook=compact_runs)
    assert next(iter(data["runs"].values()))["state"][0] == 300
    with pytest.raises((ValueError, OverflowError)):
        Session.from_dict(data)


def test_reading_api_runs_and_stack_counts():
    b = BatchBuilder()
    inner = b.stack(("g", "a.py", 2), ("f", "a.py", 1))
    outer = b.stack(("f", "a.py", 1))
    first = b.batch([{1: (HOLD, outer), 2: (IDLE, NO_STACK, FUTEX)}, {1: (HOLD, inner), 2: (IDLE, NO_STACK, FUTEX)}])
    # Thread 2 is missing in pass 3: its idle stretch is cut there even though the state is the same.
    second = b.batch([{1: (WAIT, inner, FUTEX)}, {1: (WAIT, inner, FUTEX)}, {1: HOLD, 2: (IDLE, NO_STACK, FUTEX)}])
    session = make_session([first, second])

    assert session.tids() == [1, 2]
    assert session.runs() == [
        (1, 0, 2, HOLD, outer, NO_SYSCALL),
        (1, 2, 2, WAIT, inner, FUTEX),
        (1, 4, 1, HOLD, NO_STACK, NO_SYSCALL),
        (2, 0, 2, IDLE, NO_STACK, FUTEX),
        (2, 4, 1, IDLE, NO_STACK, FUTEX),
    ]
    assert session.stack_counts() == {
        (1, HOLD, outer): 1,
        (1, HOLD, inner): 1,
        (1, WAIT, inner): 2,
        (1, HOLD, NO_STACK): 1,
        (2, IDLE, NO_STACK): 3,
    }
    assert session.stack(inner) == [("g", "a.py", 2), ("f", "a.py", 1)]
    assert session.stack(NO_STACK) == []
    assert session.pass_end(4) == session.pass_start(4) + session.period_s
    assert session.pass_end(0) == session.pass_start(1)


def test_recording_round_trips_every_process():
    from gilty.sampling.session import Recording

    b = BatchBuilder()
    a = make_session([b.batch([{1: HOLD}, {1: WAIT}])])
    c = make_session([BatchBuilder().batch([{7: IDLE}])])
    c.target.pid = 99
    rec = Recording([a, c], rate_hz=100.0)
    rec.subprocesses = True
    back = Recording.from_dict(rec.to_dict())
    assert back.pids == [a.target.pid, 99]
    assert back.subprocesses
    assert back.session(99).runs() == c.runs()
    assert back.session(a.target.pid).runs() == a.runs()


def test_a_holder_waiting_for_a_cpu_is_counted_as_holding():
    from gilty.sampling.aggregate import aggregate_rows

    cpu_wait = 6
    # pass 0: tid 2 holds the GIL without a CPU while 3 waits; pass 1: tid 3 runnable, no holder.
    rows = [
        (0, 3, WAIT, NO_STACK, NO_SYSCALL),
        (0, 2, cpu_wait, NO_STACK, NO_SYSCALL, True),
        (1, 3, cpu_wait, NO_STACK, NO_SYSCALL),
    ]
    session = make_session([{"times": [0.0, 0.001], **aggregate_rows(2, rows)}])
    assert session.held_cpu_wait == {2: 1}
    assert session.passes_holder_cpu_wait() == 1


def test_twin_counts_samples_handling_an_exception_as_the_native_aggregate_does():
    from gilty.sampling.aggregate import aggregate_rows

    # The scenario of aggregate.rs's samples_handling_an_exception_are_counted_apart_by_thread_state_and_stack.
    rows = [
        (0, 1, IDLE, 5, 230, False, True),
        (0, 2, HOLD, 6, NO_SYSCALL),
        (1, 1, IDLE, 5, 230, False, True),
        (1, 2, HOLD, 7, NO_SYSCALL, True, True),
    ]
    fields = aggregate_rows(2, rows)
    assert fields["handling"] == [(1, IDLE, 5, 2), (2, HOLD, 7, 1)]
    assert len(fields["counts"]) == 3, "the handling flag does not split the counts"


def test_error_paths_and_positions_round_trip_and_older_recordings_load_without_them():
    import json

    import pytest
    from gilty.sampling.aggregate import aggregate_rows

    b = BatchBuilder(names={1: "main", 2: "worker"})
    s1 = b.stack(("f", "a.py", 3), ("g", "b.py", 2))
    batch = b.batch([{1: (IDLE, s1, FUTEX), 2: HOLD}, {1: (IDLE, s1, FUTEX), 2: HOLD}])
    handled = [(p, 1, IDLE, s1, FUTEX, False, True) for p in range(2)]
    batch["handling"] = aggregate_rows(2, handled)["handling"]
    f_id = batch["stacks"][s1][0]  # the innermost frame, ("f", "a.py", 3)
    # Two instructions of line 3 seen: the one read more often is the frame's position.
    batch["positions"] = [(f_id, 3, 5, 4, 9, 1), (f_id, 3, 3, 0, 12, 2)]
    session = make_session([batch])
    assert session.handling_samples(1) == 2 and session.handling_samples(2) == 0
    assert session.frame_position(f_id) == (3, 3, 0, 12)
    loaded = Session.from_dict(json.loads(json.dumps(session.to_dict())))
    assert loaded.handling == session.handling
    assert loaded.frame_position(f_id) == (3, 3, 0, 12)
    assert loaded.frame_positions == session.frame_positions

    older = session.to_dict()
    del older["handling"], older["frame_positions"]
    old = Session.from_dict(older)
    assert old.handling == {} and old.frame_positions == {} and old.frame_position(f_id) is None

    bad = session.to_dict()
    bad["handling"] = [[1, IDLE, s1, 99]]  # more samples handling than the thread has
    with pytest.raises(ValueError):
        Session.from_dict(bad)
