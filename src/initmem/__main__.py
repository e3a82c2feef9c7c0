"""`python -m initmem`: the initmem command line."""

import sys

from initmem.cli import main

sys.exit(main())
