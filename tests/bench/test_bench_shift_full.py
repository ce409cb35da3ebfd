"""`layout bench shift` (MTO §6.5.1) end to end at SF 0.01 with two values of q, as a user
runs it (`make test-bench`; tests/spark/test_bench_shift.py keeps its helpers' tests and a smaller run
in `make test`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_benchmark_end_to_end_at_a_tiny_scale(tmp_path):
    """SF 0.01, 2 queries per template, blocks of 1000 rows (lineitem about 50 blocks), two
    values of q, without the gentle shift (it lays all tables out once more)."""
    work = tmp_path / "shift"
    # its own process, as a user runs it: the benchmark starts and stops a SparkSession of its own
    done = subprocess.run(
        [sys.executable, "-m", "layout_core.bench.shift", "--sf", "0.01", "--per-template", "2",
         "--block-rows", "1000", "--q", "100,200", "--no-gentle", "--work", str(work), "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    r = json.loads(lines[0])

    assert set(r) == {"old", "full", "partial", "unchanged_window_reward"}
    assert set(r["old"]) == {"blocks_read"} and isinstance(r["old"]["blocks_read"], int)
    assert set(r["full"]) == {"blocks_read", "blocks_rewritten", "seconds"}
    assert isinstance(r["full"]["blocks_read"], int) and isinstance(r["full"]["blocks_rewritten"], int)
    assert isinstance(r["full"]["seconds"], float) and r["full"]["seconds"] > 0
    assert list(r["partial"]) == ["100", "200"]  # q <= w, and the targets' q (rewrites: test_partial_reorg)
    fields = {"blocks_read": int, "blocks_rewritten": int, "blocks_total": int, "reoptimize_seconds": float,
              "subtrees_evaluated": int, "subtrees_total": int}
    for p in r["partial"].values():
        assert set(p) == set(fields)
        assert all(isinstance(p[k], t) for k, t in fields.items()), p
        assert 0 <= p["blocks_rewritten"] <= p["blocks_total"]
        assert 0 <= p["subtrees_evaluated"] <= p["subtrees_total"]
    assert isinstance(r["unchanged_window_reward"], float)

    assert r["full"]["blocks_read"] <= r["old"]["blocks_read"]
    assert r["unchanged_window_reward"] == 0
    # q <= w: reorganizing can never pay off, so nothing is measured or rewritten.
    assert r["partial"]["100"]["blocks_rewritten"] == 0 and r["partial"]["100"]["subtrees_evaluated"] == 0
    # Not asserted: that a larger q never rewrites fewer blocks. The exact optimal set guarantees it
    # (for q1 < q2 and optimal sets S1, S2, adding R_q1(S1) >= R_q1(S2) and R_q2(S2) >= R_q2(S1)
    # gives B(S2) >= B(S1), then C(S2) >= C(S1); B does not depend on q, and the sample is a row
    # hash, the same in every copy). But the pruned search the DAG runs is exact only while the
    # greedy trees T' keep MTO's property 2, B(T) >= B(T_L) + B(T_R) (reorg/optimal_set.py); where
    # one breaks it, pruning may miss a set at one q and not at another. At this scale it held when
    # measured (0, 0, 50, 50 blocks rewritten); at SF 0.1 it did not (0, 0, 49, 46): at q = 1000 the
    # pruned search missed the orders subtree (5 blocks, reward 7) it chose at q = 500, which the
    # exhaustive search (prune=False) still finds, its trees breaking property 2 at 4 nodes.

    full = json.loads((work / "result.json").read_text())
    assert full["old"]["blocks_total"] == r["partial"]["200"]["blocks_total"]
    assert set(full["targets"]) == {"recovery", "rewritten_fraction", "reoptimize_vs_full",
                                    "unchanged_window_reward"}
    assert (work / "shift_blocks_read.png").stat().st_size > 0
