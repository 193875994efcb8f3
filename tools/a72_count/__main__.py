"""``python -m tools.a72_count``: see the package's docstring."""

import sys

from . import main

sys.exit(main())
