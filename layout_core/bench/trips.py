"""`layout bench trips`: B1's measurements on taxi trips with correlated columns and
outliers (Pando's example; data and templates in workload.trips): zone and payment
laid out first, then trips, by every layout asked for; odd instances of the ten
templates train, even ones test; the same report as `layout bench tpch`. `sweep`
runs it for several outlier shares and plots blocks read against the share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from layout_core.bench.tpch import LAYOUTS, BenchData, run_benchmark
from layout_core.workload.trips import TABLES, generate, generate_trips
from layout_core.workload.trips import schema as trips_schema

SORT_KEYS = {"trips": "tr_pickup"}  # sortkey: trips in pickup order, the dimensions by key


def run(rows: int = 6_000_000, outliers: float = 0.01, block_rows: int = 10_000, per_template: int = 8,
        seed: int = 1, work: Path = Path(".layout/bench/trips"), layouts=LAYOUTS, spark_e2e: bool = False,
        dips: bool = False, coordinates: bool = False) -> dict:
    """With `coordinates`, trips has pickup and dropoff points and the distance
    templates filter the straight-line distance between them (workload.trips)."""
    work = work.resolve()
    name = f"rows{rows}_outliers{outliers:g}_seed{seed}" + ("_coordinates" if coordinates else "")
    data = work / f"trips_{name}"
    # made once per setting, cached in the work folder (generate_trips renames a whole folder into place)
    paths = ({t: data / f"{t}.parquet" for t in TABLES} if data.is_dir()
             else generate_trips(rows, outliers, seed, data, coordinates))
    what = f"taxi trips, {rows:,} rows, {outliers:.0%} outliers" + (", straight-line distances" if coordinates else "")
    bench = BenchData(what, trips_schema(coordinates), paths,
                      tuple(generate(per_template, seed, straight_line=coordinates)), SORT_KEYS, name,
                      {"rows": rows, "outliers": outliers, "seed": seed, "coordinates": coordinates})
    return run_benchmark(bench, block_rows, work, layouts, spark_e2e, None, dips)


FARE_DISTANCE = ("1", "2", "6", "8", "10")  # the templates filtering the correlated pair, fare or distance


def sweep(shares: Sequence[float], rows: int = 6_000_000, block_rows: int = 10_000, per_template: int = 8,
          seed: int = 1, work: Path = Path(".layout/bench/trips"), layouts=LAYOUTS, spark_e2e: bool = False,
          dips: bool = False, coordinates: bool = False) -> dict:
    """`run` for each outlier share (each in its own folder under `work`, with
    its whole report as result.json), and the curve: blocks the test queries
    read per layout, in all and on the fare and distance templates, against
    the share; chart outlier_sweep.png."""
    work = work.resolve()
    points = []
    for share in shares:
        folder = work / f"outliers{share:g}"
        result = run(rows, share, block_rows, per_template, seed, folder, layouts, spark_e2e, dips, coordinates)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "result.json").write_text(json.dumps(result, indent=2))
        points.append({
            "outliers": share,
            "blocks_read": {name: r["blocks_read"] for name, r in result["layouts"].items()},
            "fare_distance_blocks": {name: sum(r["blocks_per_template"].get(t, 0) for t in FARE_DISTANCE)
                                     for name, r in result["layouts"].items()},
            "lower_bound_blocks": result["lower_bound_blocks"],
        })
    chart = work / "outlier_sweep.png"
    _sweep_chart(chart, points, rows, block_rows, coordinates)
    return {"rows": rows, "block_rows": block_rows, "seed": seed, "coordinates": coordinates, "points": points,
            "chart": str(chart)}


def format_sweep(result: dict) -> str:
    """The sweep as a table: per share, each layout's blocks read (all test queries / fare and
    distance templates) and, beside mto when it ran, the ratio to mto's."""
    names = list(result["points"][0]["blocks_read"]) if result["points"] else []
    lines = [f"B1 on taxi trips, {result['rows']:,} rows, blocks of {result['block_rows']} rows: blocks read by "
             f"the test queries (all / fare and distance templates {', '.join('q' + t for t in FARE_DISTANCE)})"]
    lines.append("outliers  " + "  ".join(f"{name:>24}" for name in names))
    for p in result["points"]:
        cells = []
        for name in names:
            total, pair = p["blocks_read"][name], p["fare_distance_blocks"][name]
            text = f"{total} / {pair}"
            if "mto" in p["blocks_read"] and name != "mto" and p["blocks_read"]["mto"]:
                text += f" ({total / p['blocks_read']['mto']:.2f}x)"
            cells.append(f"{text:>24}")
        lines.append(f"{p['outliers']:>8.0%}  " + "  ".join(cells))
    lines.append(f"chart {result['chart']}")
    return "\n".join(lines)


def _sweep_chart(path: Path, points: list[dict], rows: int, block_rows: int, coordinates: bool = False) -> None:
    # matplotlib only when the chart is drawn: the CLI imports this module to build its parser
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use('Agg')

    shares = [100 * p["outliers"] for p in points]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, what in ((axes[0], "blocks_read", "all test queries"),
                          (axes[1], "fare_distance_blocks", "fare and distance templates")):
        for i, name in enumerate(points[0][key]):  # dashes and shrinking markers keep equal curves visible
            ax.plot(shares, [p[key][name] for p in points], marker="o", markersize=8 - 1.5 * (i % 4),
                    linestyle=("-", "--", "-.", ":")[i % 4], label=name)
        ax.set_xlabel("outlier trips (%)")
        ax.set_ylabel("blocks read")
        ax.set_title(what)
    axes[0].plot(shares, [p["lower_bound_blocks"] for p in points], color="grey", linestyle=":",
                 label="lower bound")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"taxi trips, {rows:,} rows, blocks of {block_rows:,} rows"
                 + (", distance templates on the straight line" if coordinates else ""))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
