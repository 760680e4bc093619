"""``python -m awaken`` is the ``awaken`` command."""

import sys

from awaken.cli import main

sys.exit(main())
