"""Thread names cut to fit a column keep their ends, where pools and workers differ (issue 31 item 10:
eight rows of `ThreadPoolExecutor-~`)."""

from gilty.report.labels import cut_name, cut_names


def test_a_cut_name_keeps_its_number():
    assert cut_name("ThreadPoolExecutor-0_7", 20) == "ThreadPoolExe~or-0_7"
    assert cut_name("MainThread", 20) == "MainThread"


def test_names_alike_to_the_end_keep_more_of_it():
    names = [f"uWSGIWorker1Core{i}-request-handler-{i}" for i in (1, 2)] + ["MainThread"]
    cut = cut_names(names, 20)
    assert all(len(c) <= 20 for c in cut) and len(set(cut)) == 3, cut
