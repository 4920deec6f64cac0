"""The three flows end to end: signed events and clicks from the emulator, real Redis, a real RQ worker."""

from __future__ import annotations

from tests.bot.slack.conftest import SlackBot, wait_for


def test_mention_posts_a_run_card_and_the_answer(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    replies = wait_for(lambda: bot.bot_replies(ts)[1:] and bot.bot_replies(ts), what="card and answer")
    card, answer = replies[0], replies[1]
    assert "Done" in card["text"] or "Done" in str(card.get("blocks"))
    assert answer["text"] == "done: check_health ok"
    assert bot.executions("check_health")
    assert run_id
