"""spark-submit jobs/reduce.py --table T --partition P --run-id R ... (see --help)."""

import sys

from layout_core.flows.nightly.job import main

if __name__ == "__main__":
    sys.exit(main("reduce"))
