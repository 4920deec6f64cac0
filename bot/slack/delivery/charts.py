"""Charts in a run's thread: one PNG per tool result that listed series, sent by the background sender.

``SlackPresenter.show_chart`` queues a ``chart_delivery`` and returns: the loop never waits for
Pillow or Slack. The sender renders the chart when it sends it (``bot.slack.rendering.chart``)
and uploads it the way Slack takes files now (``files_upload_v2``: files.getUploadURLExternal
with the byte length and the alt text, the bytes, files.completeUploadExternal sharing it in the
thread with its title). Each chart is a delivery of its own (keyed by the run and its evidence
id: charts never replace one another, nor the card) and carries the run's tag, so the end of
the job gives it the same bounded wait as the run's final card.

What may go wrong stays with the chart: Slack refusing it (no ``files:write``, uploads disabled,
the alt text refused) is a failed delivery, logged; a 429 waits out Slack's ``Retry-After``; a
server or connection error is tried again a few times (``bot.slack.delivery.sender``). The
answer, the cards and the notices are other deliveries and posts, untouched by its fate.

Every text goes through the presenter's redactor once more (the run's already did, in
``bot.runs.charts``): names, query and window before they are laid out, so no shortening can cut
a secret in two before the redactor sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from slack_sdk import WebClient

from bot.runs.charts import Chart
from bot.runs.presenter import RunRef
from bot.slack.rendering.chart import chart_alt_text, chart_file_name, chart_title, render_png
from bot.slack.rendering.mrkdwn import escape

log = logging.getLogger(__name__)

UPLOAD_METHOD = "files.completeUploadExternal"  # the rate tier the sender paces charts by (Tier 4)


def chart_comment(chart: Chart) -> str:
    """The message the chart comes with: the bot's own words, the evidence id and the tool's name."""
    count = len(chart.series) + chart.more
    what = f"{count} series" if count != 1 else "1 series"
    return f":chart_with_upwards_trend: {escape(chart.label)}: {what}"


def upload_chart(client: WebClient, run: RunRef, chart: Chart, redact: Callable[[str], str]) -> None:
    """Render ``chart`` and share it in the run's thread; raises what Slack (or the upload) raised."""
    shown = chart.redacted(redact)
    image = render_png(shown)
    client.files_upload_v2(
        channel=run.channel,
        thread_ts=run.thread_ts,
        file=image,
        filename=chart_file_name(shown),
        title=chart_title(shown),
        alt_txt=chart_alt_text(shown),
        initial_comment=chart_comment(shown),
    )
    log.info("run %s: chart of %s shared (%d bytes)", run.run_id, shown.label, len(image))
