"""``make demo``: the whole bot on this machine with simulated hosts (``main`` starts it in order)."""
