"""``python -m attnlab.cli ...`` (as under ``torchrun -m attnlab.cli``): the same as ``attnlab ...``."""

import sys

from . import main

sys.exit(main())
