"""``python -m awaken`` is the ``awaken`` command."""

import sys

from .cli import main

sys.exit(main())
