"""``python -m loopgate``: the same as the ``loopgate`` command."""

import sys

from loopgate.gateway.cli import main

sys.exit(main())
