"""The task view's await sites: a parent's wait for its children is not a site of its own."""

from __future__ import annotations

from gilty.sampling.tasks import AWAITING, NO_AWAIT, TaskView


def _view(paths: dict, awaits: dict, counts: list) -> TaskView:
    return TaskView.from_dict({"passes": 10, "counts": counts, "paths": paths, "awaits": awaits, "lifetimes": [], "errors": {}})


def test_a_task_awaiting_a_task_never_sampled_is_not_an_await_site():
    # A pass keeps the tasks two reads agree on: a child started between them is left out, and its
    # parent, suspended on it, is kept. Before: "task" listed beside the semaphore in the await sites.
    view = _view(
        {"1": ["Task-1"], "2": ["handler"]},
        {"1": ["task", 7], "2": ["semaphore", 8]},
        [[1, 0, AWAITING, 1, 3], [2, 0, AWAITING, 2, 7]],
    )
    assert view.child_waits() == {(1, 1)}
    assert view.await_sites() == [("semaphore", 8, 7)]
    assert view.own_samples() == 7


def test_a_gather_whose_children_were_not_seen_stays_a_site():
    # Other child kinds keep the rule that the children were seen: `wait` and `shield` also wrap
    # plain futures, whose wait is the task's own.
    view = _view({"1": ["Task-1"]}, {"1": ["wait", 7]}, [[1, 0, AWAITING, 1, 4], [1, 0, 0, NO_AWAIT, 1]])
    assert view.child_waits() == set()
    assert view.await_sites() == [("wait", 7, 4)]


def test_a_parent_of_seen_children_awaits_them():
    view = _view(
        {"1": ["main"], "2": ["main", "child"]},
        {"1": ["gather", 5], "2": ["sleep", 6]},
        [[1, 0, AWAITING, 1, 5], [2, 0, AWAITING, 2, 5]],
    )
    assert view.child_waits() == {(1, 1)}
    assert view.await_sites() == [("sleep", 6, 5)]
