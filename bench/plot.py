"""PNG charts of the cold-start and load figures in results/latest.json (matplotlib, bench-only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.common import RESULTS

LABELS = {
    "python_pass": "python\n(nothing)",
    "boto3": "import\nboto3",
    "api_discover": "ours:\ndiscover",
    "api_call": "ours:\ntools/call",
    "sdk_discover": "SDK+Mangum:\ndiscover",
    "sdk_call": "SDK+Mangum:\ntools/call",
}
COLORS = {
    "python_pass": "#bbbbbb",
    "boto3": "#f0a030",
    "api_discover": "#2a7ab9",
    "api_call": "#5aa0d8",
    "sdk_discover": "#c0392b",
    "sdk_call": "#e07060",
}


def plot_cold(cold: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in LABELS if n in cold["variants"]]
    med = [cold["variants"][n]["wall_ms"]["median"] for n in names]
    p90 = [cold["variants"][n]["wall_ms"]["p90"] for n in names]
    has_ins = all("instructions" in cold["variants"][n] for n in names)
    fig, axes = plt.subplots(1, 2 if has_ins else 1, figsize=(11 if has_ins else 6.5, 4.2), squeeze=False)
    ax = axes[0][0]
    x = range(len(names))
    ax.bar(x, med, color=[COLORS[n] for n in names])
    ax.errorbar(
        x,
        med,
        yerr=[[0] * len(names), [p - m for p, m in zip(p90, med, strict=True)]],
        fmt="none",
        ecolor="#333",
        capsize=4,
    )
    ax.set_xticks(list(x), [LABELS[n] for n in names], fontsize=7)
    ax.set_ylabel("ms, spawn to answer (median, bar to p90)")
    ax.set_title(f"Cold start, wall time ({cold['runs']} runs each, interleaved)", fontsize=9)
    for i, m in enumerate(med):
        ax.text(i, m, f"{m:.0f}", ha="center", va="bottom", fontsize=7)
    if has_ins:
        ax2 = axes[0][1]
        ins = [cold["variants"][n]["instructions"] / 1e6 for n in names]
        ax2.bar(x, ins, color=[COLORS[n] for n in names])
        ax2.set_xticks(list(x), [LABELS[n] for n in names], fontsize=7)
        ax2.set_ylabel("million instructions to the answer (callgrind)")
        ax2.set_title("Cold start, instructions (noise-free)", fontsize=9)
        for i, v in enumerate(ins):
            ax2.text(i, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    path = out / "cold_start.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_load(load: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(load["methods"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.26
    for k, (key, color) in enumerate((("p50_ms", "#2a7ab9"), ("p95_ms", "#f0a030"), ("p99_ms", "#c0392b"))):
        values = [load["methods"][m][key] for m in methods]
        ax.bar(
            [i + (k - 1) * width for i in range(len(methods))], values, width, label=key.replace("_ms", ""), color=color
        )
    ax.set_xticks(range(len(methods)), [f"{m}\n(n={load['methods'][m]['count']})" for m in methods], fontsize=8)
    ax.set_ylabel("latency, ms")
    ax.set_title(
        f"Local stack, {load['tasks']} concurrent tasks: {load['requests_per_s']:.0f} req/s,"
        f" lost {load['lost']}, wrong {load['wrong_state']}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "load.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(results_path: Path = RESULTS / "latest.json") -> list[Path]:
    data = json.loads(results_path.read_text())
    made = []
    if isinstance(data.get("coldstart"), dict) and "variants" in data["coldstart"]:
        made.append(plot_cold(data["coldstart"], results_path.parent))
    if isinstance(data.get("load"), dict) and "methods" in data["load"]:
        made.append(plot_load(data["load"], results_path.parent))
    return made


if __name__ == "__main__":
    for path in main(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "latest.json"):
        print(f"wrote {path}")
