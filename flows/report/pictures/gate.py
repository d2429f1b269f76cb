"""The promotion gate, as a picture: did tonight's candidate beat production on the
held-out examples, by how much, how sure is that, and did any slice fall too far?"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from flows.production.gate import Evidence, PromotionDecision, paired, paired_gain, slice_members
from flows.report.pictures.palette import BLACK, BLUE, GREY, ORANGE, VERMILLION, WIDTH, signed
from infra.settings import PromotionSettings


@dataclass(frozen=True)
class Bar:
    """One bar: the mean held-out gain of a group of examples with its interval."""

    label: str
    n: int
    gain: float
    low: float | None
    high: float | None
    colour: str
    hatch: str | None = None


def bars(
    evidence: Evidence,
    decision: PromotionDecision | None,
    cfg: PromotionSettings,
    seed: int = 0,
) -> list[Bar]:
    """All held-out examples first (the gate's own gain and interval when it decided),
    then each slice by name, its interval from the gate's paired bootstrap
    (`flows.production.gate.paired_gain`) with the gate's resamples and seed."""
    ids, new, old = paired(evidence)
    if decision is not None and decision.low is not None:
        overall = (decision.gain, decision.low, decision.high)
    else:
        estimate = paired_gain(new, old, cfg, seed)
        overall = (estimate.value, estimate.low, estimate.high)
    out = [Bar("all held-out examples", len(ids), *overall, BLUE)]
    fell = decision.slice_drops if decision is not None else {}
    for name, members in sorted(slice_members(ids, evidence.slices).items()):
        estimate = paired_gain([new[i] for i in members], [old[i] for i in members], cfg, seed)
        if len(members) < cfg.min_slice_size:
            colour, hatch = GREY, "//"
        else:
            colour, hatch = (VERMILLION if name in fell else ORANGE), None
        out.append(
            Bar(name, len(members), estimate.value, estimate.low, estimate.high, colour, hatch)
        )
    return out


def figure(
    evidence: Evidence | None,
    decision: PromotionDecision | None,
    cfg: PromotionSettings | None = None,
    seed: int = 0,
) -> Figure | None:
    """Did the candidate beat production on the held-out examples, and did any slice
    fall too far? One bar per group (all examples, then each slice): the mean gain,
    candidate minus production, with its 95% paired bootstrap interval, beside the zero
    line and the slice-drop line (`promotion.max_slice_drop`). None: no evidence."""
    if evidence is None or not paired(evidence)[0]:
        return None
    cfg = cfg or PromotionSettings()
    drawn = bars(evidence, decision, cfg, seed)
    fig = Figure(figsize=(WIDTH, 2.6 + 0.45 * len(drawn)), layout="constrained")
    axis = fig.subplots()
    rows = list(range(len(drawn)))[::-1]  # all examples on top
    for row, bar in zip(rows, drawn, strict=True):
        axis.barh(row, bar.gain, color=bar.colour, hatch=bar.hatch, edgecolor="white", height=0.6)
        if bar.low is not None and bar.high is not None:
            axis.errorbar(
                bar.gain,
                row,
                xerr=[[bar.gain - bar.low], [bar.high - bar.gain]],
                color=BLACK,
                capsize=4,
                linewidth=1.2,
            )
    axis.set_yticks(rows, [f"{bar.label} (n={bar.n})" for bar in drawn])
    axis.axvline(0.0, color=BLACK, linewidth=1)
    axis.axvline(-cfg.max_slice_drop, color=VERMILLION, linestyle="--", linewidth=1.2)
    if cfg.min_gain > 0:
        axis.axvline(cfg.min_gain, color=BLUE, linestyle=":", linewidth=1.2)
    _label_bars(axis, rows, drawn)
    _pad(axis, drawn, cfg)
    scored = "true labels" if evidence.by_labels else "the night's judge"
    axis.set_xlabel(
        f"gain in mean held-out score, candidate \u2212 production (scored by {scored})\n"
        "whiskers: 95% paired bootstrap interval over examples"
    )
    axis.grid(axis="x", alpha=0.3)
    fig.legend(handles=_legend(cfg, drawn), loc="outside lower center", ncols=3, fontsize="small")
    verdict = "no decision" if decision is None else ("passed" if decision.passed else "refused")
    against = (
        f"v{evidence.production_version}" if evidence.production_version else "the seed prompts"
    )
    fig.suptitle(f"Promotion gate {verdict}: tonight's candidate against production ({against})")
    if decision is not None and not decision.passed:
        why = decision.reason.partition("refused: ")[2] or decision.reason
        axis.set_title(textwrap.fill(f"Why: {why}", 120), fontsize="small", color=VERMILLION)
    return fig


def _label_bars(axis, rows: list[int], drawn: list[Bar]) -> None:
    """Each bar's gain and interval as text, right of its whisker and of the zero line."""
    for row, bar in zip(rows, drawn, strict=True):
        text = signed(bar.gain)
        if bar.low is not None and bar.high is not None:
            text += f"  [{signed(bar.low)}, {signed(bar.high)}]"
        if bar.colour == VERMILLION:
            text += "  fell too far"
        end = max(bar.gain, bar.high if bar.high is not None else bar.gain, 0.0)
        axis.annotate(
            text,
            (end, row),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )


def _pad(axis, drawn: list[Bar], cfg: PromotionSettings) -> None:
    """Room for the zero and slice-drop lines, and for the text right of each bar."""
    lows = [b.low if b.low is not None else b.gain for b in drawn] + [-cfg.max_slice_drop, 0.0]
    highs = [b.high if b.high is not None else b.gain for b in drawn] + [cfg.min_gain, 0.0]
    low, high = min(lows), max(highs)
    span = max(high - low, 0.05)
    axis.set_xlim(low - 0.05 * span, high + 0.42 * span)


def _legend(cfg: PromotionSettings, drawn: list[Bar]) -> list:
    """What the colours and lines mean, for the kinds of bar drawn."""
    kinds = [
        (BLUE, None, "all held-out examples"),
        (ORANGE, None, "a slice"),
        (VERMILLION, None, "a slice that fell too far"),
        (GREY, "//", f"a slice too small to check (< {cfg.min_slice_size} examples)"),
    ]
    shown = {(bar.colour, bar.hatch) for bar in drawn}
    handles: list = [
        Patch(facecolor=colour, hatch=hatch, edgecolor="white", label=label)
        for colour, hatch, label in kinds
        if (colour, hatch) in shown
    ]
    handles.append(Line2D([], [], color=BLACK, linewidth=1, label="no gain"))
    handles.append(
        Line2D(
            [],
            [],
            color=VERMILLION,
            linestyle="--",
            label=f"most a slice may fall ({signed(-cfg.max_slice_drop)}, max_slice_drop)",
        )
    )
    if cfg.min_gain > 0:
        handles.append(
            Line2D([], [], color=BLUE, linestyle=":", label=f"least gain ({cfg.min_gain:.3f})")
        )
    return handles
