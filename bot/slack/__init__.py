"""The Slack transport: the Bolt app, Block Kit rendering, the Slack presenter and the web process.

Nothing outside ``bot/slack`` imports Slack SDK types; the run logic talks to Slack only through
the presenter interface in ``bot.runs.presenter``.
"""
