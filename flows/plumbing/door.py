"""The one way in for whatever changes a state folder: a night (`flywheel run`, the
scheduled deployment) and a production move (`flywheel promote`, `rollback`, `serving
sync`). Each goes through `door`, so none of them can race another on the folder's
stores and aliases, or leave trace text readable by others, whichever way it started.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from flows.plumbing.environment import prepare_environment
from flows.plumbing.night_lock import one_night
from flows.plumbing.private_state import private_state
from infra.settings import Settings

if TYPE_CHECKING:
    from flows.night.runtime import Runtime


@contextmanager
def door(settings: Settings, holder: str) -> Iterator[None]:
    """The settings' state folder private (0700; its files 0600 as the block starts and
    ends), the libraries' settings local and offline, and the folder's lock held as
    `holder` (what the command is, in words) for the block: a command already in there
    makes this one wait up to `state.wait_for_night_s`, then refuse with one sentence
    (NightRunning)."""
    prepare_environment(settings.state_dir)
    with private_state(settings.state_dir):
        # before anything opens the folder's stores: a second command must not race on them
        with one_night(settings.state_dir, holder, settings.state.wait_for_night_s):
            yield


@contextmanager
def night_door(settings: Settings, run_id: str) -> Iterator[Runtime]:
    """`door` for night `run_id`, and inside it the night's runtime, preflighted: a model,
    trace source or registry out of reach is one sentence before the night starts."""
    with door(settings, f"night {run_id}"):
        # imported behind the door: the runtime imports MLflow and the model libraries,
        # which read the environment the door sets when they load
        from flows.night.runtime import Runtime
        from infra.lm.heap import keep_heap_trimmed

        with Runtime(settings) as runtime:  # its models let go as the night ends
            runtime.preflight()
            # a night's process only, once it can run: each trim holds the heap's locks
            # for a moment, which a long night does not feel and a test timing its event
            # loop does
            keep_heap_trimmed()
            yield runtime
