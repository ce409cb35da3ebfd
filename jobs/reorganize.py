"""spark-submit jobs/reorganize.py STEP --table T --run-id R [--q 200] ... (see --help)."""

import sys

from layout_core.flows.reorg.job import main

if __name__ == "__main__":
    sys.exit(main())
