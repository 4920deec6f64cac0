"""Block Kit and mrkdwn for everything the bot shows in Slack: pure functions, no Slack calls.

``render`` (run cards, notices, modals), ``approval_card``, ``blockkit`` (building blocks and Slack's
limits), ``mrkdwn`` (Markdown to mrkdwn, escaping, splitting), ``verbatim`` (text shown as it is,
inert), ``stream_text``, ``transcript_text``, ``people`` (mentions instead of raw IDs), ``findings``
(the Findings message), ``citations`` (the answer's citations, by code's verdict) and ``similar`` (the
"Similar:" note of past incidents and its Forget buttons).
"""
