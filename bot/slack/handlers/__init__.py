"""What the web process does with what Slack sends: mentions, replies, clicks, commands, the Home tab.

``app`` wires the Bolt listeners to the modules that decide (``events``, ``actions``, ``continuation``,
``help``, ``feedback``, ``break_glass``, ``home``, ``callbacks``, ``findings_clicks``: Refute / Focus on
the Findings message, ``forget_clicks``: Forget on a "Similar:" note of past incidents, ``undo_clicks``: Undo on a
check line, and ``steering``, whether a reply or such a click cancels an approval);
``runtime`` is what they share;
``acknowledgements``, ``courtesy`` and ``follow_ups`` are the calls made after Slack has been answered.
"""
