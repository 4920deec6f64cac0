"""Operations: the ``chatops`` CLI (``cli`` and the ``*_cli`` commands), ``doctor`` and its checks,
the system prompt, and the composition root that builds every process from the settings
(``compose``; ``compose_web`` for the web process, ``sweep`` for the recovery sweep).

The top layer: it may import every other package of ``bot``; none imports it.
"""
