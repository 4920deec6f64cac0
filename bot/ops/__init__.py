"""Operations: the CLI, doctor, metrics exposition, the models and system prompt from settings, the production composition."""
