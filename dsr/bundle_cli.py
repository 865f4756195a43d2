"""``python -m dsr.bundle_cli FILE ...``: the documented command of the offline bundle
checker, which is :mod:`core.bundle.cli` (see there for the options and exit status)."""

import sys

from core.bundle.cli import main

if __name__ == "__main__":
    sys.exit(main())
