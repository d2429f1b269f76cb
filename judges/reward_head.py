"""A reward head: P(pass) from the judge model's features, fitted on the human labels.

The judge model's verdict token (`judges.pointwise`) reads one direction of its final
hidden state; a logistic head fitted on the labels reads the whole state, so it can
learn what the labels turn on where no rubric says it. On the router's labels a head on
the 1.5B teacher's final hidden state at the last token of the judge's own pointwise
prompt agreed at held-out kappa 0.46 / 0.53 / 0.64 with 50 / 100 / 150 training labels,
where the teacher's P(Yes) alone gave 0.33 (shared MEASURED.md). On the demo's splits 0-9
(60 + 40 labels, 66 held out) the night's head read 0.578 on average (0.427 to 0.696, AUC
0.865) against 0.204 for P(Yes) at a calibrated cut, and an instruction to the judge
appended to a failing reply turned 14 of 471 to pass, against 120 of 357
(`benchmarks/judge_reward_head.py`). The last layer it is: a head on an earlier one
(layers 7-25 of the teacher's 28) read no better there (mean 0.36-0.59).

P(pass) = sigmoid(w . (features - mean) / scale + b), with the features the judge's `LM`
returns for its pointwise prompt (`LM.features`: the final norm's output at the prompt's
last token). The head is a few numbers per feature, saved as JSON (floats written as
Python's repr, so a reloaded head scores the very same bits) with the judge model it was
read on: features of another model mean nothing to it, so it is never applied there
(`not_applicable`). Fitting is scikit-learn's; scoring is the plain formula above, the
same code for a fitted head and a reloaded one.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from infra.lm import LM

FILE = "judge_head.json"  # in the head's folder, beside the notes it reads (`judges.memory`)
FORMAT = "flywheel.judge_head/1"


@dataclass(frozen=True)
class HeadFit:
    """How a head is fitted on ~60-150 labels and some 1.5k features: far more features
    than labels, so everything here is about not fitting noise."""

    # Inverse L2 strengths (scikit-learn's C, on standardized features). One: the head is
    # fitted at it. Several: the one with the best cross-validated log-loss on the training
    # labels. One fixed C is the default: on the demo's splits 0-9 (60 + 40 labels, the
    # 1.5B teacher's 1536 features) any C from 0.01 to 1 gave mean held-out kappa 0.57-0.58,
    # and choosing among them by cross-validation on 60 labels 0.53-0.55 (its noise costs
    # more than the right C gains); 0.03 had the best mean and the best worst split.
    strengths: tuple[float, ...] = (0.03,)
    # Stratified folds for choosing the strength and for the out-of-fold P(pass) the cut
    # is calibrated on (`out_of_fold`); fewer when a label has fewer examples.
    folds: int = 5
    max_iter: int = 5000

    def __post_init__(self) -> None:
        if not self.strengths or any(not c > 0 for c in self.strengths):
            raise ValueError(f"HeadFit.strengths must be positive numbers, got {self.strengths}")
        if self.folds < 2:
            raise ValueError(f"HeadFit.folds must be at least 2, got {self.folds}")


@dataclass(frozen=True)
class JudgeModel:
    """The judge model a head's features were read on: its checkpoint folder, and a digest
    of that folder's config.json (a copy of the checkpoint elsewhere is the same model)."""

    path: str
    config_sha256: str | None = None

    @classmethod
    def of(cls, lm: LM) -> JudgeModel | None:
        """The model `lm` judges with, where it names a local checkpoint (None: it names none)."""
        path = getattr(lm, "base_model_path", None)
        return None if path is None else cls(str(path), _config_digest(path))

    def same_as(self, other: JudgeModel) -> bool:
        if Path(self.path) == Path(other.path):
            return True
        return self.config_sha256 is not None and self.config_sha256 == other.config_sha256


@dataclass(frozen=True)
class RewardHead:
    """A fitted head: standardization, then a logistic regression."""

    weights: tuple[float, ...]  # per standardized feature
    bias: float
    mean: tuple[float, ...]  # the training features' mean
    scale: tuple[float, ...]  # and their standard deviation (1 where it is 0)
    model: JudgeModel  # the judge model the features were read on
    strength: float  # the C it was fitted with
    labels: int  # labels it was fitted on
    memory: int = 0  # reviewers' notes in the prompt it reads (`judges.memory`), 0: none

    def __post_init__(self) -> None:
        sizes = {len(self.weights), len(self.mean), len(self.scale)}
        if len(sizes) != 1 or not self.weights:
            raise ValueError(
                f"a reward head needs weights, mean and scale of one length, got "
                f"{len(self.weights)}, {len(self.mean)} and {len(self.scale)}"
            )
        values = np.asarray(self.weights + self.mean + self.scale + (self.bias,))
        if not np.isfinite(values).all() or min(self.scale) <= 0:
            raise ValueError("a reward head's numbers must be finite and its scale positive")

    @property
    def dimension(self) -> int:
        return len(self.weights)

    def logit(self, features: Sequence[float]) -> float:
        x = np.asarray(features, dtype=np.float64)
        if x.shape != (self.dimension,):
            raise ValueError(
                f"a reward head on {self.dimension} features was given {x.size}: it was read "
                f"on {self.model.path}, not the model that gave these"
            )
        standardized = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return float(standardized @ np.asarray(self.weights) + self.bias)

    def p_pass(self, features: Sequence[float]) -> float:
        return _sigmoid(self.logit(features))

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fields = {"format": FORMAT, "dimension": self.dimension} | asdict(self)
        path.write_text(json.dumps(fields))  # json writes floats as repr: exact on reload
        return path

    @classmethod
    def load(cls, folder: str | Path) -> RewardHead:
        """The head saved in `folder`; a missing or bad field is an error naming the file
        and the field."""
        path = Path(folder) / FILE
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"{path}: not a judge head file ({err})") from err
        if not isinstance(saved, dict):
            raise ValueError(f"{path}: not a judge head file (not a JSON object)")

        def field(name: str, kind: type | tuple[type, ...]) -> Any:
            if name not in saved:
                raise ValueError(f"{path}: a judge head file needs field {name!r}")
            value = saved[name]
            if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
                raise ValueError(f"{path}: field {name!r} has the wrong type ({value!r:.60})")
            return value

        if (found := field("format", str)) != FORMAT:
            raise ValueError(f"{path}: field 'format' is {found!r}, this flywheel reads {FORMAT!r}")
        model = field("model", dict)
        if not isinstance(model.get("path"), str):
            raise ValueError(f"{path}: field 'model' needs a 'path' (the judge model's checkpoint)")
        numbers = {}
        for name in ("weights", "mean", "scale"):
            values = field(name, list)
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                raise ValueError(f"{path}: field {name!r} must be a list of numbers")
            numbers[name] = tuple(float(v) for v in values)
        if field("dimension", int) != len(numbers["weights"]):
            raise ValueError(
                f"{path}: field 'dimension' is {saved['dimension']}, but 'weights' holds "
                f"{len(numbers['weights'])}"
            )
        try:
            return cls(
                **numbers,
                bias=float(field("bias", int | float)),
                model=JudgeModel(model["path"], model.get("config_sha256")),
                strength=float(field("strength", int | float)),
                labels=field("labels", int),
                memory=field("memory", int),
            )
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err


def not_applicable(lm: LM, head: RewardHead) -> str:
    """Why `head` must not score features `lm` reads ("" when it may): they come from
    another judge model than the one it was read on. Where `lm` names no checkpoint there
    is nothing to contradict, and the features' length is checked at scoring."""
    model = JudgeModel.of(lm)
    if model is None or head.model.same_as(model):
        return ""
    return f"was read on {head.model.path}, not on tonight's judge model {model.path}"


def fit_head(
    features: Sequence[Sequence[float]],
    labels: Sequence[bool],
    model: JudgeModel,
    cfg: HeadFit = HeadFit(),
    seed: int = 0,
    memory: int = 0,
) -> RewardHead:
    """A head fitted on `features` (one row per labelled exchange) and their labels, both
    labels weighted equally, at `cfg`'s strength (chosen by cross-validation on them when
    it names several)."""
    x, y = _checked(features, labels)
    strength = choose_strength(x, y, cfg, seed)
    scaler, logistic = _pipeline(strength, cfg).fit(x, y).named_steps.values()
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    return RewardHead(
        weights=tuple(float(w) for w in logistic.coef_[0]),
        bias=float(logistic.intercept_[0]),
        mean=tuple(float(m) for m in scaler.mean_),
        scale=tuple(float(s) for s in scale),
        model=model,
        strength=strength,
        labels=len(y),
        memory=memory,
    )


def choose_strength(x: np.ndarray, y: np.ndarray, cfg: HeadFit, seed: int) -> float:
    """The strength whose out-of-fold P(pass) has the least log-loss (ties: the stronger
    penalty). Log-loss rather than accuracy or AUC: with a dozen passing labels a fold's
    AUC moves in steps of a few hundredths, and log-loss also punishes overconfidence."""
    if len(cfg.strengths) == 1:
        return cfg.strengths[0]

    def loss(c: float) -> float:
        p = np.clip(_out_of_fold(x, y, c, cfg, seed), 1e-12, 1 - 1e-12)
        weights = np.where(y, 0.5 / y.mean(), 0.5 / (1 - y.mean()))  # as the fit weighs them
        return float(-np.mean(weights * np.where(y, np.log(p), np.log(1 - p))))

    return min(sorted(cfg.strengths), key=loss)


def out_of_fold(
    features: Sequence[Sequence[float]],
    labels: Sequence[bool],
    strength: float,
    cfg: HeadFit = HeadFit(),
    seed: int = 0,
) -> list[float]:
    """P(pass) of each exchange from a head fitted on the other folds: what a head says of
    labels it has not seen, so a pass cut calibrated on them holds beyond its training
    labels (on those the fitted head sits near 0 and 1)."""
    x, y = _checked(features, labels)
    return [float(p) for p in _out_of_fold(x, y, strength, cfg, seed)]


def _out_of_fold(x: np.ndarray, y: np.ndarray, c: float, cfg: HeadFit, seed: int) -> np.ndarray:
    folds = StratifiedKFold(min(cfg.folds, int(y.sum()), int((~y).sum())), shuffle=True,
                            random_state=seed)  # fmt: skip
    return cross_val_predict(_pipeline(c, cfg), x, y, cv=folds, method="predict_proba")[:, 1]


def _pipeline(c: float, cfg: HeadFit):
    return make_pipeline(
        StandardScaler(),
        LogisticRegression(C=c, class_weight="balanced", max_iter=cfg.max_iter),
    )


def _checked(
    features: Sequence[Sequence[float]], labels: Sequence[bool]
) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(features, dtype=np.float64), np.asarray(labels, dtype=bool)
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"a head fits one feature row per label, got {x.shape} and {len(y)}")
    if min(int(y.sum()), int((~y).sum())) < 2:
        raise ValueError(
            f"a reward head needs at least 2 passing and 2 failing labels, got "
            f"{int(y.sum())} and {int((~y).sum())}"
        )
    return x, y


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def _config_digest(checkpoint: str | Path) -> str | None:
    try:
        return hashlib.sha256((Path(checkpoint) / "config.json").read_bytes()).hexdigest()
    except OSError:  # not a local checkpoint folder: the path alone names it
        return None
