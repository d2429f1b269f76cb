"""One night at a time per state folder, and a killed night never blocks the next."""

import signal
import subprocess
import sys
import time

import pytest

from flows.night.run_id import check_run_id
from flows.plumbing.night_lock import LOCK_FILE, NightRunning, one_night
from infra.errors import UserFacingError

HOLD = """
import sys, time
from pathlib import Path
from flows.plumbing.night_lock import one_night
with one_night(Path(sys.argv[1]), "night 20261201T020000Z", wait_s=0):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_second_night_is_told_which_night_runs_and_a_killed_one_frees_the_folder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        with pytest.raises(
            NightRunning, match=r"in use by night 20261201T020000Z \(process \d+"
        ) as err:
            with one_night(tmp_path, "second", wait_s=0.5):
                pass
        assert time.monotonic() - started >= 0.5  # it waited as long as it was told
        assert "state.wait_for_night_s" in str(err.value)
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup runs: the kernel drops the lock
        holder.wait()
    with one_night(tmp_path, "third", wait_s=0):
        assert (tmp_path / LOCK_FILE).exists()
    with one_night(tmp_path, "fourth", wait_s=0):  # released at the end of the block
        pass


@pytest.mark.parametrize("run_id", ["../../x", "a/b", "", ".hidden", "x" * 65, "a..b"])
def test_a_run_id_that_could_leave_the_state_folder_is_refused(run_id: str) -> None:
    with pytest.raises(UserFacingError, match="not a night's run id"):
        check_run_id(run_id)


def test_run_ids_of_nights_are_accepted() -> None:
    assert check_run_id("20261201T020000Z") == "20261201T020000Z"
    assert check_run_id("e2e_night-2.1") == "e2e_night-2.1"
