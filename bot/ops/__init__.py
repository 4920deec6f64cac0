"""Operations: the ``chatops`` CLI (``cli`` and the ``*_cli`` commands), ``doctor`` and its checks,
the system prompt, and the production composition: the worker (``worker``) and the fleet
(``fleet``) built from the settings.

The top layer: it may import every other package of ``bot``; none imports it.
"""
