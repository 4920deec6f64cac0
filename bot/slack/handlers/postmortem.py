"""The **Postmortem draft** button of a finished run card and ``/ops postmortem <run id or thread
link>`` (``/ops handoff`` is ``bot.slack.handlers.handoff``).

Both upload the run's postmortem draft (``bot.postmortem``) to the run's thread as a Markdown file
(``files_upload_v2``: files.getUploadURLExternal, the upload, files.completeUploadExternal), with a
short summary message; the timeline's links are Slack permalinks where the bot has them
(``chat.getPermalink``), else audit entry ids.

Channel boundaries: a click must come from a card in the run's own channel (Slack delivers it only
to someone who sees that channel); a command names any run, so the asker must be able to see the
run's channel (``bot.slack.memberships``: a private channel only for its members; fail closed),
and a run they may not see is answered exactly as a run that does not exist. One draft per run a
minute (``slack:postmortem:{run}``), so a double click or a looping command does not fill the thread.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from bot.claims import claim_once
from bot.errors import BotError
from bot.postmortem.errors import BadThreadLink
from bot.postmortem.facts import Postmortem
from bot.postmortem.render import to_markdown
from bot.postmortem.source import is_link, load_postmortem, parse_thread_link
from bot.runs.record import RunRecord, RunRecords
from bot.slack.continuation import last_run
from bot.slack.delivery.permalinks import Permalinks
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.memberships import visibility
from bot.slack.rendering.mrkdwn import escape, is_user_id, mention, plural
from bot.slack.user_zones import UserZones

log = logging.getLogger(__name__)
COOLDOWN_SECONDS = 60
NO_SUCH_RUN = "No run you may see matches that (a run id, or a link to its thread)."
USAGE = "Usage: `/ops postmortem <run id or thread link>` (the draft goes to that run's thread)."


def file_name(run_id: str) -> str:
    """The file's name: the run's id (ours), never text from the run."""
    return f"postmortem-{run_id[:12]}.md"


def summary(pm: Postmortem, user: str) -> str:
    """The message that carries the file: counts and enum values only, nothing from the run's texts."""
    return (
        f":memo: *Postmortem draft* of run `{escape(pm.run_id[:12])}`, asked for by {mention(user)}: "
        f"conclusion {escape(pm.conclusion)}; {plural(len(pm.timeline), 'timeline fact')}, "
        f"{plural(len(pm.actions), 'action')}, {plural(len(pm.to_discuss), 'question')} to discuss. "
        "Every timeline line links to the audit entry or message that backs it: edit before sharing."
    )


class PostmortemDrafts:
    def __init__(self, runtime: WebRuntime) -> None:
        self._rt = runtime
        # The requester's time zone beside UTC; the asker's when no person started the run (an alert).
        self._zones = UserZones(runtime.client)

    def button(self, run_id: str, user: str, channel: str) -> str | None:
        """A click on a finished run card: ``None`` when the draft was posted, else the note to the clicker."""
        record = self._rt.service().get(run_id)
        if record is None or record.channel != channel:
            return "This button does not belong to a run of this channel. No draft was made."
        return self._draft(record, user)

    def command(self, user: str, argument: str) -> str:
        """``/ops postmortem <run id or thread link>``: the note to the person who asked."""
        if not argument.strip():
            return USAGE
        try:
            record = self._find(argument.strip())
        except BadThreadLink:
            return USAGE
        if record is None or not visibility(self._rt.client(), user).may_see(record.channel):
            return NO_SUCH_RUN  # a private channel's run, to a non-member, is one that does not exist
        return self._draft(record, user) or "The postmortem draft is in the run's thread."

    def _find(self, argument: str) -> RunRecord | None:
        service = self._rt.service()
        if is_link(argument):
            thread = parse_thread_link(argument)
            run_id = last_run(service.redis, self._rt.keys, thread.channel, thread.thread_ts)
            return service.get(run_id) if run_id else None
        if len(argument) > 64 or not argument.isalnum():
            return None
        found = service.get(argument)
        if found is None and len(argument) >= 8:  # the card shows the first 12 characters
            matches = RunRecords(service.redis, self._rt.keys).scan_ids(argument)
            found = service.get(matches[0]) if len(matches) == 1 else None
        return found

    def _draft(self, record: RunRecord, user: str) -> str | None:
        if not self._rt.channel_allowed(record.channel):
            return "The bot does not work in that run's channel (CHATOPS_CHANNELS)."
        if not record.status.terminal:
            return "A postmortem draft is made once the run has ended."
        service = self._rt.service()
        flag = self._rt.keys.slack("postmortem", record.run_id)
        if not claim_once(service.redis, flag, COOLDOWN_SECONDS):
            return "A postmortem draft of this run was just posted in its thread."
        client = self._rt.client()
        permalinks = Permalinks(client)

        def permalink(channel: str, ts: str) -> str | None:
            try:
                return permalinks.get(channel, ts)
            except SlackApiError as error:
                log.warning(
                    "postmortem of %s: no permalink for %s/%s (%s)", record.run_id, channel, ts, error
                )
                return None

        try:
            pm = load_postmortem(
                service.redis,
                self._rt.keys,
                service.audit,
                record.run_id,
                redact=self._rt.redact,
                permalink=permalink,
                clock=self._rt.clock,
            )
            client.files_upload_v2(
                channel=record.channel,
                thread_ts=record.thread_ts,
                content=to_markdown(
                    pm, self._zones.zone(record.requester if is_user_id(record.requester) else user)
                ),
                filename=file_name(record.run_id),
                title=f"Postmortem draft of run {record.run_id[:12]}",
                initial_comment=summary(pm, user),
            )
        except BotError as error:
            service.redis.delete(flag)
            return f"No draft was made: {escape(str(error))}"
        except SlackApiError as error:
            service.redis.delete(flag)  # nothing arrived: a new request may try again
            code = error.response.get("error") if error.response is not None else "error"
            log.warning("postmortem of %s not uploaded: %s", record.run_id, code)
            return f"The draft could not be uploaded to the thread ({escape(str(code))})."
        return None
