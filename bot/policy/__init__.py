"""The access policy: who may request a tool call, who may decide on one, what is denied.

- ``rules``: the policy's model (rules, audiences, verdicts) and its pure decisions.
- ``file``: ``CHATOPS_POLICY_FILE``, read strictly (docs/POLICY.md).
- ``proposals``: the policy at proposal time: what a run is offered and what is refused.
- ``break_glass``: for a few minutes, a named person may approve anything.
- ``explain``: ``chatops policy explain``: what applies to one request and why.
- ``deciders``: who may decide (approve, decline, supersede, stop, read a transcript, declare
  break-glass): ``Deciders.decide``, the one function every caller asks.

Who is who (a full member, a guest, in which user group) is injected (``rules.Identity``); Slack's
answer is ``bot.slack.policy_identity``.
"""
