"""`flywheel run` on one of the examples, as a user runs it, with a test's budgets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLYWHEEL = str(Path(sys.executable).with_name("flywheel"))


def run_example_night(
    example: Path, state: Path, **settings: str
) -> subprocess.CompletedProcess[str]:
    """The example's own flywheel.toml, its state in `state`, and `settings` (environment
    names without FLYWHEEL_) over a test's defaults: one prompt step, no judge LoRA."""
    test_defaults = {
        "AGENT_OPT__REFLECTION_MAX_TOKENS": "48",
        "FAST_SLOW__SCHEDULE": "p",
        "JUDGE__UNTRUSTED_NIGHT": "optimize",  # the 135M judge is not trusted
        "JUDGE__LORA__ENABLED": "false",  # tested in test_e2e_nightly
    }
    env = {
        **os.environ,
        "FLYWHEEL_CONFIG": str(example / "flywheel.toml"),
        "FLYWHEEL_STATE_DIR": str(state),
        **{f"FLYWHEEL_{key}": value for key, value in (test_defaults | settings).items()},
    }
    return subprocess.run(
        [FLYWHEEL, "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
