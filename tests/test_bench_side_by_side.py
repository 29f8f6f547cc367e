"""bench/side_by_side.py gathers every `min / median / max` figure a bench prints, run by run, so
the two commits' columns are the bench's own figures and nothing else."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from side_by_side import figures, spread  # noqa: E402  (bench/ is not a package)

ONE_RUN = """\
default settings: auto-delete 30 min, verification off, caption ''
run 1 runbot, network none: 600 new users' /start <file> handled at 323 updates/s

min / median / max of 1 runs:
  queries per /start <file>, new user (worst of 200)  8 / 8 / 8
  latency p95, ms (200 users)                     4.7 / 4.7 / 4.7
  runbot updates/s (600 new users at once), network none       1,323 / 1,323 / 1,323
  steps p50 0.101 / 0.101 / 0.101, p95 0.178 / 0.178 / 0.178
"""


def test_each_summary_figure_is_read_under_its_own_line():
    assert figures(ONE_RUN) == {
        "queries per /start <file>, new user (worst of 200) {}": 8.0,
        "latency p95, ms (200 users) {}": 4.7,
        "runbot updates/s (600 new users at once), network none {}": 1323.0,
        "steps p50 {}, p95 {} #1": 0.101,
        "steps p50 {}, p95 {} #2": 0.178,
    }


def test_lines_without_a_three_figure_spread_are_not_figures():
    assert figures("run 1: all/allowed 0.953 over 21.1 s; FLOOD_WAITs 0\nmin / median / max of 1 runs:") == {}


def test_the_spread_keeps_the_figures_digits():
    assert spread([0.953, 0.949, 0.954]) == "0.949 / 0.953 / 0.954"
    assert spread([7332.4, 7970.0, 7444.1]) == "7,332 / 7,444 / 7,970"
    assert spread([4.7, 5.4, 4.3]) == "4.3 / 4.7 / 5.4"


def test_the_same_lines_under_two_headings_are_two_figures():
    output = """\
free (allowed 30/s, limiter 28.5/s):
    achieved/allowed           0.962 / 0.962 / 0.962
paid (allowed 1000/s, limiter 955/s):
    achieved/allowed           0.957 / 0.957 / 0.957
"""
    assert figures(output) == {
        "free (allowed 30/s, limiter 28.5/s): achieved/allowed {}": 0.962,
        "paid (allowed 1000/s, limiter 955/s): achieved/allowed {}": 0.957,
    }


def test_a_heading_is_the_same_whatever_the_load_it_names():
    one = "min / median / max of 1 (load 8.35):\n    of which taken, p95, ms   278 / 278 / 278\n"
    other = "min / median / max of 1 (load 14.13):\n    of which taken, p95, ms   519 / 519 / 519\n"
    assert figures(one).keys() == figures(other).keys()
