"""Waiting for the machine to settle before a contender starts (``--settle-load``)."""

from __future__ import annotations

import pytest

from bench.__main__ import parse_args
from bench.machine import wait_for_load

ARGS = ["--kubeconfig", "/dev/null", "--kwok", "/bin/true", "--kwok-stages", "/dev/null"]
ARGS += ["--kube-scheduler", "/bin/true", "--rawbinder", "/bin/true"]


class Machine:
    """A clock that moves only when slept on, and a load that falls 0.5 per 10 s from 4."""

    def __init__(self, start: float = 4.0, fall: float = 0.05) -> None:
        self.now = 0.0
        self.start = start
        self.fall = fall
        self.reads = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds

    def load(self) -> list[float]:
        self.reads += 1
        return [max(0.0, self.start - self.fall * self.now), 1.0, 1.0]


def test_it_waits_until_the_load_is_at_most_the_threshold() -> None:
    m = Machine()
    lines: list[str] = []
    waited, reached = wait_for_load(
        2.0, 600, progress=lines.append, read=m.load, clock=m.clock, sleep=m.sleep
    )
    assert reached
    assert waited == 40.0  # 4 - 0.05 * 40 = 2.0, polled every 5 s
    assert len(lines) == 8
    assert "load 4.00 > 2" in lines[0]


def test_it_gives_up_at_the_timeout_and_says_so() -> None:
    m = Machine(fall=0.0)
    waited, reached = wait_for_load(1.5, 12, read=m.load, clock=m.clock, sleep=m.sleep)
    assert not reached
    assert waited == 12.0  # the last sleep is cut to the timeout
    assert m.reads == 4


def test_a_machine_already_calm_or_that_cannot_say_starts_at_once() -> None:
    m = Machine(start=1.0)
    assert wait_for_load(1.5, 600, read=m.load, clock=m.clock, sleep=m.sleep) == (0.0, True)
    assert wait_for_load(1.5, 600, read=list, clock=m.clock, sleep=m.sleep) == (0.0, True)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--settle-load", "0"], "--settle-load: expected a load average above 0"),
        (["--settle-max", "-1"], "--settle-max"),
    ],
)
def test_bad_settle_flags_are_refused(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args([*ARGS, *flags])
    assert message in capsys.readouterr().err


def test_settle_flags_are_off_by_default() -> None:
    a = parse_args(ARGS)
    assert a.settle_load is None
    assert parse_args([*ARGS, "--settle-load", "1.5"]).settle_load == 1.5
