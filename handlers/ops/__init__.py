"""Operations: the HTTP server, JSON logs, metrics and graceful shutdown."""
