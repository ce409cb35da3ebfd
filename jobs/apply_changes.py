"""spark-submit jobs/apply_changes.py STEP --table T --run-id R [--inserted P] [--deleted P] (see --help)."""

import sys

from layout_core.flows.changes.job import main

if __name__ == "__main__":
    sys.exit(main())
