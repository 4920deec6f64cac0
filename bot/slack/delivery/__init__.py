"""Getting things into Slack: the client, the sender thread, streaming, and the presenters.

``client`` (the ``WebClient`` every process uses), ``sender`` (the one background thread that sends
what may wait), ``presenter`` (a durable run in its thread) and ``alert_presenter`` (alert threads),
``streaming`` and ``answers`` (the final answer), ``findings_message`` (the run's Findings message) and
``permalinks`` (a step's link), ``blocks`` (redaction and plainer fallbacks of blocks),
``thread_status``, ``queued_note``, ``lost_cards``, ``similar_note`` (a thread's note of similar past
incidents, with its Forget buttons).
"""
