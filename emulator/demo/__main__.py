"""``python -m emulator.demo``: the demo's entry point (``emulator.demo.main``)."""

import sys

from emulator.demo.main import main

sys.exit(main())
