"""The edges: Slack (Bolt app, blocks) and the terminal (typer CLI). They parse, call `bot`, render."""
