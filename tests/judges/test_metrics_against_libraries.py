"""judges.metrics checked against scikit-learn and SciPy on seeded random samples.

The hand-written statistics stay because the bootstrap calls them a thousand times per
report, where scikit-learn's input checks cost a hundred times more; these tests hold
them to the libraries' answers on small samples full of ties and constant sides, and
pin down where the conventions differ (a library's NaN, the project's defined value).
"""

import math
import random
import warnings
from statistics import fmean

import numpy as np
import pytest
from scipy.stats import bootstrap as scipy_bootstrap
from scipy.stats import spearmanr
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from judges.calibration import balanced_accuracy
from judges.metrics import bootstrap, cohen_kappa, spearman, weighted_kappa

CASES = 400


def _samples(seed: int, labels: list) -> tuple[list, list]:
    """A pair of ratings of 1 to 12 items over 1 to all of `labels`: tiny samples, many
    ties, and (often, at one label) a constant side."""
    rng = random.Random(seed)
    used = labels[: rng.randint(1, len(labels))]
    n = rng.randint(1, 12)
    return [rng.choice(used) for _ in range(n)], [rng.choice(used) for _ in range(n)]


def _library(statistic, *args, **kwargs) -> float:
    """The library's value, NaN where it is undefined (its warning silenced: NaN is what
    the tests look at)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(statistic(*args, **kwargs))


@pytest.mark.parametrize("labels", [["a", "b", "c", "d"], [True, False], [1, 2, 3]])
def test_cohen_kappa_agrees_with_scikit_learn(labels):
    for seed in range(CASES):
        pred, gold = _samples(seed, labels)
        expected = _library(cohen_kappa_score, pred, gold)
        if math.isnan(expected):
            # scikit-learn's 0/0: both raters gave the one same label; here that is 1.
            assert len(set(pred) | set(gold)) == 1, (pred, gold)
            assert cohen_kappa(pred, gold) == 1.0
        else:
            assert cohen_kappa(pred, gold) == pytest.approx(expected, abs=1e-12), (pred, gold)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
@pytest.mark.parametrize("levels", [["low", "mid", "high"], [1.0, 2.0, 3.0, 4.0, 5.0]])
def test_weighted_kappa_agrees_with_scikit_learn(weights, levels):
    for seed in range(CASES):
        pred, gold = _samples(seed, levels)
        # `labels` gives scikit-learn the scale's order; its weights are |i-j| unscaled,
        # which divides out of the ratio.
        expected = _library(cohen_kappa_score, pred, gold, labels=levels, weights=weights)
        ours = weighted_kappa(pred, gold, levels, weights)
        if math.isnan(expected):
            assert len(set(pred) | set(gold)) == 1, (pred, gold)
            assert ours == 1.0
        else:
            assert ours == pytest.approx(expected, abs=1e-12), (pred, gold, weights)


def test_spearman_agrees_with_scipy():
    for seed in range(CASES):
        pred, gold = _samples(seed, [1, 2, 2.5, 3, 7])  # ties within and across levels
        expected = _library(lambda p, g: spearmanr(p, g).statistic, pred, gold)
        ours = spearman(pred, gold)
        if math.isnan(expected):
            assert ours is None, (pred, gold)  # a constant side, or a single item
        else:
            assert ours == pytest.approx(expected, abs=1e-12), (pred, gold)


def test_spearman_on_continuous_values_agrees_with_scipy():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 30, 200):
        pred, gold = rng.normal(size=n), rng.normal(size=n)
        gold[: n // 2] = pred[: n // 2] + rng.normal(scale=0.1, size=n // 2)
        expected = spearmanr(pred, gold).statistic
        assert spearman(list(pred), list(gold)) == pytest.approx(expected, abs=1e-12)


def test_balanced_accuracy_agrees_with_scikit_learn():
    for seed in range(CASES):
        pred, gold = _samples(seed, [True, False])
        # scikit-learn takes the truth first; with one class present it averages that one.
        expected = _library(balanced_accuracy_score, gold, pred)
        assert balanced_accuracy(pred, gold) == pytest.approx(expected, abs=1e-12), (pred, gold)


@pytest.mark.parametrize("seed", range(5))
def test_paired_bootstrap_interval_agrees_with_scipy(seed):
    """The gate's measure: the mean gain of paired scores. Both percentile intervals come
    from 4000 resamples, so they differ by Monte Carlo noise only."""
    rng = np.random.default_rng(seed)
    n = 30
    old = rng.uniform(size=n)
    new = np.clip(old + rng.normal(0.05, 0.2, size=n), 0, 1)

    ours = bootstrap(
        lambda a, b: fmean(a) - fmean(b), list(new), list(old), resamples=4000, seed=seed
    )
    theirs = scipy_bootstrap(
        (new, old),
        lambda a, b: np.mean(a) - np.mean(b),
        paired=True,
        vectorized=False,
        n_resamples=4000,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval

    width = theirs.high - theirs.low
    assert ours.value == pytest.approx(float(np.mean(new - old)))
    assert ours.low == pytest.approx(theirs.low, abs=0.05 * width)
    assert ours.high == pytest.approx(theirs.high, abs=0.05 * width)


def test_kappa_bootstrap_interval_agrees_with_scipy():
    """A statistic of the pair that is not a mean: kappa on 60 boolean labels."""
    rng = random.Random(7)
    gold = [rng.random() < 0.4 for _ in range(60)]
    pred = [g if rng.random() < 0.8 else not g for g in gold]

    ours = bootstrap(cohen_kappa, pred, gold, resamples=4000, seed=1)
    theirs = scipy_bootstrap(
        (np.array(pred), np.array(gold)),
        lambda p, g: cohen_kappa(list(p), list(g)),
        paired=True,
        vectorized=False,
        n_resamples=4000,
        method="percentile",
        rng=np.random.default_rng(1),
    ).confidence_interval

    width = theirs.high - theirs.low
    assert ours.low == pytest.approx(theirs.low, abs=0.05 * width)
    assert ours.high == pytest.approx(theirs.high, abs=0.05 * width)
