"""The access policy: who may request a tool call, who may decide on one, what is denied.

- ``rules``: the policy's model (rules, audiences, verdicts) and its pure decisions.
- ``file``: ``CHATOPS_POLICY_FILE``, read strictly (docs/POLICY.md).
- ``proposals``: the policy at proposal time: what a run is offered and what is refused.
- ``break_glass``: for a few minutes, a named person may approve anything.
- ``explain``: ``chatops policy explain``: what applies to one request and why.

Slack's side of it (who is a full member, who is in which user group, a click judged by the file)
is ``bot.slack.approvers``, ``bot.slack.policy_identity`` and ``bot.slack.policy_clicks``.
"""
