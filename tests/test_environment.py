"""The tests' own environment (tests/conftest.py) holds on any machine and in any clone:
one console width, and the settings' defaults whatever settings file lies about."""

from rich.console import Console

from infra.settings import LoraSettings, Settings


def test_the_console_is_as_wide_on_every_machine():
    assert Console().width == 200
    assert Console(stderr=True).width == 200


def test_a_settings_file_in_the_working_folder_is_not_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a clone's root with its own `flywheel init` file
    (tmp_path / "flywheel.toml").write_text("[lora]\nrank = 2\n")
    assert Settings().lora.rank == LoraSettings().rank != 2
