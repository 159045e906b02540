"""``python -m attnlab.build_assets``: ``make models`` (:func:`attnlab.build_assets.driver.main`)."""

import sys

from .driver import main

if __name__ == "__main__":
    sys.exit(main())
