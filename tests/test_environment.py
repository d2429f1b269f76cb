"""The tests' own environment (tests/conftest.py) holds on any machine and in any clone:
one console width, the settings' defaults whatever settings file lies about, and this
clone's code in every process a test starts."""

import subprocess
import sys
from pathlib import Path

from rich.console import Console

from infra.settings import LoraSettings, Settings


def test_the_console_is_as_wide_on_every_machine():
    assert Console().width == 200
    assert Console(stderr=True).width == 200


def test_a_settings_file_in_the_working_folder_is_not_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a clone's root with its own `flywheel init` file
    (tmp_path / "flywheel.toml").write_text("[lora]\nrank = 2\n")
    assert Settings().lora.rank == LoraSettings().rank != 2


def test_a_process_a_test_starts_runs_this_clone_s_code(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import flows; print(flows.__file__)"],
        cwd=tmp_path,  # nowhere near the clone
        capture_output=True,
        text=True,
        check=True,
    )
    clone = Path(__file__).resolve().parents[1]
    assert Path(done.stdout.strip()) == clone / "flows" / "__init__.py"
