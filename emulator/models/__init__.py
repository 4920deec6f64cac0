"""Scripted model servers speaking the real OpenAI and Anthropic wire formats, and their scenarios."""
