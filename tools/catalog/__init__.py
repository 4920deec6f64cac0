"""The YAML tool catalog (``CHATOPS_TOOLS_FILE``): a team's runbook actions as tools.

See docs/TOOLS.md for the format. ``load_catalog`` is the entry point.
"""

from tools.catalog.loader import Catalog, load_catalog

__all__ = ["Catalog", "load_catalog"]
