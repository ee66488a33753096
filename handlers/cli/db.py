"""`triage-bot db upgrade`: migrate DATABASE_URL (run once per deploy; `serve` also does it by default)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Attach the `db` group."""
    db_app = typer.Typer(help="Database schema (alembic migrations).", no_args_is_help=True)

    @db_app.command("upgrade")
    def upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
        """Migrate DATABASE_URL to the latest schema."""
        from sqlalchemy.engine import make_url

        from bot.config import load_settings
        from storage import db

        settings = load_settings()
        db.upgrade(url=settings.database_url, revision=revision)
        shown = make_url(settings.database_url).render_as_string(hide_password=True)
        typer.echo(f"database at {revision}: {shown}")

    app.add_typer(db_app, name="db", help="Database schema migrations (db upgrade).")
