"""PNG charts of an export summary (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .export import ChannelSummary


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_charts(channels: list[ChannelSummary], out_dir: Path) -> list[Path]:
    """attempts.png (attempts distribution per channel, completed and dead
    stacked) and latency.png (create-to-complete p50 / p95 / p99 per channel)."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "attempts.png", out_dir / "latency.png"]
    names = [s.channel for s in channels]
    width = 0.8 / max(1, len(channels))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    # Attempts: x = number of attempts, one bar group per value, one bar per channel.
    fig, ax = plt.subplots(figsize=(max(7.5, 3.0 + 0.9 * len(names)), 4.2))
    attempts = sorted({a for s in channels for a in s.attempts})
    for i, s in enumerate(channels):
        xs = [a + (i - (len(channels) - 1) / 2) * width for a in attempts]
        done = [s.attempts_completed.get(a, 0) for a in attempts]
        dead = [s.attempts_dead.get(a, 0) for a in attempts]
        color = colors[i % len(colors)]
        ax.bar(xs, done, width, color=color, label=f"{s.channel} completed")
        if any(dead):
            ax.bar(xs, dead, width, bottom=done, color=color, alpha=0.45, hatch="//",
                   edgecolor="black", linewidth=0.5, label=f"{s.channel} dead")
        for x, d, k in zip(xs, done, dead):
            if d + k:
                ax.annotate(str(d + k), (x, d + k), ha="center", va="bottom", fontsize="x-small",
                            xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(attempts or [1])
    ax.set_xlabel("attempts")
    ax.set_ylabel("messages")
    ax.set_title("Attempts per message, by channel (hatched: dead letters)")
    top = max((s.attempts_completed.get(a, 0) + s.attempts_dead.get(a, 0) for s in channels for a in attempts),
              default=0)
    ax.set_ylim(0, max(1, top) * 1.12)  # room for the count labels
    if channels:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=110)
    plt.close(fig)

    # Latency: one bar group per channel, bars p50 / p95 / p99.
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 + 1.2 * len(names)), 4.2))
    with_latency = [s for s in channels if s.latency_p50_ms is not None]
    labels = ("p50", "p95", "p99")
    for j, label in enumerate(labels):
        values = [getattr(s, f"latency_{label}_ms") for s in with_latency]
        xs = [i + (j - 1) * 0.27 for i in range(len(with_latency))]
        bars = ax.bar(xs, values, 0.27, label=label, color=colors[j % len(colors)])
        ax.bar_label(bars, fmt="%.0f", fontsize="x-small", padding=1)
    ax.set_xticks(range(len(with_latency)), [s.channel for s in with_latency])
    ax.set_ylabel("create to complete (ms)")
    ax.set_title("Latency percentiles of completed messages, by channel")
    if with_latency:
        ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths
