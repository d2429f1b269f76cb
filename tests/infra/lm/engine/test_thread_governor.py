"""The governor drops to one thread while the engine's thread waits for a core, and tries
all threads again after a pause that grows while the contention stays."""

from __future__ import annotations

from infra.lm.engine.thread_governor import FIRST_PAUSE_S, ThreadGovernor, waited_s


class Machine:
    """A clock and a run-queue wait that the test advances by hand."""

    def __init__(self):
        self.now, self.wait, self.set = 0.0, 0.0, []

    def run(self, governor: ThreadGovernor, seconds: float, waiting_share: float) -> None:
        for _ in range(round(seconds / 0.1)):
            self.now += 0.1
            self.wait += 0.1 * waiting_share
            governor.tick()


def governor(machine: Machine, threads: int = 2) -> ThreadGovernor:
    return ThreadGovernor(
        threads,
        clock=lambda: machine.now,
        waited=lambda: machine.wait,
        use_threads=machine.set.append,
    )


def test_contention_drops_to_one_thread_and_its_end_brings_all_back():
    machine = Machine()
    gov = governor(machine)
    machine.run(gov, 3, waiting_share=0.01)
    assert gov.threads == 2 and machine.set == []
    machine.run(gov, 1, waiting_share=0.5)  # two other processes on our cores
    assert gov.threads == 1 and machine.set == [1]
    machine.run(gov, 10, waiting_share=0.4)  # still waiting on one thread: stay there
    assert gov.threads == 1
    machine.run(gov, FIRST_PAUSE_S + 1, waiting_share=0.0)  # they are gone
    assert gov.threads == 2 and machine.set == [1, 2]


def test_each_failed_try_doubles_the_pause():
    machine = Machine()
    gov = governor(machine)
    machine.run(gov, 1, waiting_share=0.5)
    pauses = []
    for _ in range(3):  # one thread gets a core to itself; two would share it again
        while gov.threads == 1:
            machine.run(gov, 0.1, waiting_share=0.0)
        machine.run(gov, 0.6, waiting_share=0.3)
        assert gov.threads == 1
        pauses.append(gov.pause_s)
    assert pauses == [2 * FIRST_PAUSE_S, 4 * FIRST_PAUSE_S, 8 * FIRST_PAUSE_S]


def test_idle_time_is_not_counted_and_one_thread_needs_no_governor():
    machine = Machine()
    gov = governor(machine)
    machine.now += 5  # idle
    machine.wait += 0.0
    gov.rest()
    machine.run(gov, 1, waiting_share=0.1)
    assert gov.threads == 2
    assert not governor(machine, threads=1).enabled


def test_this_kernel_reports_the_run_queue_wait():
    assert waited_s() is None or waited_s() >= 0


def test_a_reset_brings_all_threads_back_and_forgets_the_grown_pause():
    machine = Machine()
    gov = governor(machine)
    machine.run(gov, 1, waiting_share=0.5)
    while gov.threads == 1:  # a failed try doubles the pause
        machine.run(gov, 0.1, waiting_share=0.0)
    machine.run(gov, 0.6, waiting_share=0.3)
    assert gov.threads == 1 and gov.pause_s == 2 * FIRST_PAUSE_S
    gov.reset()
    assert gov.threads == 2 and machine.set[-1] == 2 and gov.pause_s == FIRST_PAUSE_S
    machine.run(gov, 1, waiting_share=0.5)  # contention again: down at once
    assert gov.threads == 1
