"""The model clients behind ``agent.chat.ChatModel``: OpenAI-compatible and native Anthropic.

``endpoints`` (which provider, URL and key each model of a chain uses), ``http_model`` (what every
HTTP client shares: pool, retries, streaming, transport errors), ``retry``, ``provider_errors``,
``openai_client`` with ``openai_wire``, ``openai_dialect`` and ``sse``, and ``anthropic_client`` with
``anthropic_wire`` and ``anthropic_stream``.
"""
