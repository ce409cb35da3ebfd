"""spark-submit jobs/measure_shift.py --run-id R [--tables a,b] [--q 200] [--w 100] ... (see --help)."""

import sys

from layout_core.flows.reorg.monitor import main

if __name__ == "__main__":
    sys.exit(main())
