"""Test-wide environment: everything local, quiet, and inside a temporary folder."""

import asyncio
import gc
import os
import tempfile
from pathlib import Path

import pytest

from flows.plumbing.environment import prepare_environment
from infra.lm.heap import release_free_heap

# Every process a test starts (the CLI's entry script, `python -c`, a Prefect worker)
# imports flywheel from this clone, not from the checkout the environment's editable
# install points at (another worktree's, say).
CLONE = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(CLONE), *filter(None, [os.environ.get("PYTHONPATH")])]
)
# Never a Prefect server of the machine's user: the tests run their own, in a temp folder.
os.environ.pop("PREFECT_API_URL", None)
os.environ["PREFECT_PROFILES_PATH"] = os.devnull
# A console made at import fixes the width COLUMNS says then: none, so that every console
# takes the one `one_console_width` sets per test.
os.environ.pop("COLUMNS", None)
# Read by Prefect, MLflow and transformers at import time, so set before tests import them.
TEST_HOME = Path(tempfile.mkdtemp(prefix="flywheel-tests-"))
prepare_environment(TEST_HOME)
# The defaults, not a settings file of the clone's (`flywheel init` writes ./flywheel.toml)
# or the user's FLYWHEEL_CONFIG: a test that wants one names its own.
(TEST_HOME / "flywheel.toml").write_text("# the defaults\n")
os.environ["FLYWHEEL_CONFIG"] = str(TEST_HOME / "flywheel.toml")
# The embedded teacher (1.5B) judges and reflects by default; tests run on the 135M alone
# unless they name the teacher (`infra.settings.teacher()`), so that one night at most
# pays for it. Subprocesses (the CLI, a Prefect worker) inherit this.
os.environ.setdefault("FLYWHEEL_JUDGE_LM", "null")
os.environ.setdefault("FLYWHEEL_REFLECTION", "null")


@pytest.fixture(autouse=True)
def one_console_width(monkeypatch):
    """One console width on every machine: rich takes COLUMNS, else the terminal's (stdin's,
    even while pytest captures the output), so a sentence a test reads would wrap, or not,
    by where it runs. Wide enough that no sentence wraps; a test of wrapping sets its own.
    Per test, not for the session: pytest's own report keeps the terminal's width."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(autouse=True, scope="module")
def heap_returned_after_each_module():
    """What a module's models and nights freed goes back to the OS as the module ends:
    glibc keeps freed chunks in each thread's arena, and over the suite the process
    would hold several GiB it no longer uses (`infra.lm.heap`)."""
    yield
    gc.collect()
    asyncio.run(release_free_heap())
