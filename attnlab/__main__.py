"""``python -m attnlab``: the same as the ``attnlab`` command."""

import sys

from ._launch import main

sys.exit(main())
