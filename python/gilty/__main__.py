"""``python -m gilty``: the same entry point as the ``gilty`` console script."""

import sys

from gilty.cli import main

if __name__ == "__main__":
    sys.exit(main())
