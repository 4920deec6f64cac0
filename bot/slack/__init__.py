"""The Slack transport: what Slack sends is handled, what the bot shows is rendered and delivered.

- ``handlers/``: the Bolt app and its listeners (mentions, replies, clicks, commands, the Home tab).
- ``rendering/``: Block Kit and mrkdwn, pure functions (cards, notices, answers, mentions).
- ``delivery/``: the Web API client, the background sender, the presenters, streaming, answers.
- Top level, shared by the three: Slack's identity lookups for the policy (``policy_identity``:
  full members, user groups; who may decide is ``bot.policy.deciders``), the bot's identity
  (``identity``), channel memberships (``memberships``), which replies continue a conversation
  (``continuation``).

Nothing outside ``bot/slack`` (and ``bot/web``, ``bot/ops``) imports Slack SDK types; the run
engine talks to Slack only through ``bot.runs.presenter.Presenter``. The HTTP server is ``bot/web``.
"""
