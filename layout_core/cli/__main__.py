"""`python -m layout_core.cli` runs the `layout` command."""

import sys

from layout_core.cli import main

sys.exit(main())
