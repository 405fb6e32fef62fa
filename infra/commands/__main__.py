"""`python -m infra.commands ...`: the `trainyard` command without its entry point (e.g. in another work tree)."""

import sys

from infra.commands import main

sys.exit(main())
