"""Operations: the CLI, doctor, the system prompt, and the composition root that builds every process from the settings (``bot.ops.compose``)."""
