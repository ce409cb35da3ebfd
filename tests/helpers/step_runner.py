"""Run a DAG's Spark jobs one after the other in one process, for tests that kill it.

    python -m tests.helpers.step_runner '<json: [[entry, argv], ...]>'

`entry` is a job's command-line entry ("pipeline:<step>", "changes" or "reorg"),
`argv` the arguments the DAG gives its spark-submit. Each job runs exactly as
spark-submit runs it (argument checks, its own SparkSession, the catalog, the
step), only without a new JVM per step: SIGKILL of this process group is then
a kill of the job in whichever step it is. Before and after each job a line
`STEP-START <name>` / `STEP-DONE <name>` goes to stdout, so the killer knows
where the run is; a job that fails ends the run with its exit code.
"""

from __future__ import annotations

import json
import sys


def run_job(entry: str, argv: list[str]) -> int:
    if entry.startswith("pipeline:"):
        from layout_core.flows.nightly.job import main

        return main(entry.split(":", 1)[1], argv)
    if entry == "changes":
        from layout_core.flows.changes.job import main
    elif entry == "reorg":
        from layout_core.flows.reorg.job import main
    else:
        raise SystemExit(f"unknown job entry {entry!r}")
    return main(argv)


def step_name(entry: str, argv: list[str]) -> str:
    return entry.split(":", 1)[1] if entry.startswith("pipeline:") else argv[0]


def main() -> int:
    for entry, argv in json.loads(sys.argv[1]):
        name = step_name(entry, argv)
        print(f"STEP-START {name}", flush=True)
        code = run_job(entry, argv)
        if code:
            print(f"STEP-FAILED {name} {code}", flush=True)
            return code
        print(f"STEP-DONE {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
