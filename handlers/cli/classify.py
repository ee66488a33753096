"""`triage-bot classify`: evidence lines on stdin, one layer/rule/scope/next per line (text or JSON lines)."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from bot.diagnosis.classify import hybrid


class OutputFormat(enum.StrEnum):
    """Human columns or JSON lines for runbooks and CI."""

    TEXT = "text"
    JSON = "json"


def _nearest_column(result: hybrid.Result) -> str:
    """The learned answer's evidence in one column: the nearest labelled lines, their layer and family."""
    return " | ".join(
        f"{item.layer or 'null'} ({item.family}): {' '.join(item.text.split())[:80]}" for item in result.nearest
    )


def render_line(*, text: str, output: OutputFormat) -> str:
    """One classified line in the chosen format; `layer` is null (or '-') when unknown.

    A learned answer (no rule matched) says so: JSON adds `learned`, `confidence` and `nearest` (and `known`
    when the labelled corpus holds the line); the text format shows `learned:<confidence>` (or `known`) as
    the rule and the nearest labelled lines in a fifth column. A rule that does not decide alone (a symptom,
    a catch-all, or a layer the model rules out: `doubted`, printed after the rule id in text) keeps its id
    and next step with no layer.
    """
    result = hybrid.classify_text(text)
    if output is OutputFormat.JSON:
        data = result.to_dict()
        row = {key: data[key] for key in ("layer", "rule", "scope", "next")}
        if result.learned:
            row.update(learned=True, confidence=data["confidence"], nearest=data["nearest"])
            if result.known:
                row.update(known=True)
        elif result.weak_rule:
            row.update(weak_rule=True)
            if result.doubted:
                row.update(doubted=True)
        return json.dumps({"text": text, **row})
    layer = result.layer.value if result.layer else "-"
    scope = result.scope.value if result.scope else "-"
    if result.learned:
        how = "known" if result.known else f"learned:{result.confidence:.2f}"
        return f"{layer}\t{how}\t{scope}\t{result.next}\t{_nearest_column(result)}"
    rule = f"{result.rule} (doubted)" if result.doubted else result.rule or "-"
    return f"{layer}\t{rule}\t{scope}\t{result.next or '-'}"


def register(app: typer.Typer) -> None:
    """Attach the classify command (stdin lines) and its `train` subcommand (rebuild the learned model)."""
    group = typer.Typer(invoke_without_command=True, no_args_is_help=False, add_completion=False)

    @group.callback()
    def classify_command(
        ctx: typer.Context,
        output: Annotated[
            OutputFormat, typer.Option("--format", help="text (tab-separated) or json lines")
        ] = OutputFormat.TEXT,
    ) -> None:
        """Classify evidence lines from stdin: layer, rule, scope and the next command, one per line.

        Rules answer first; a line no rule explains may get a learned layer, marked learned, with its
        calibrated confidence and the nearest labelled lines. `classify train` rebuilds that model.
        """
        if ctx.invoked_subcommand is not None:
            return
        if sys.stdin.isatty():
            typer.echo(
                "classify reads evidence lines on stdin, e.g.: kubectl get events -A | triage-bot classify",
                err=True,
            )
            raise typer.Exit(code=2)
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            typer.echo(render_line(text=line, output=output))

    @group.command("train")
    def train_command(
        output: Annotated[Path | None, typer.Option("--output", help="artifact path (default: the packaged "
                                                                         "model.npz)")] = None,
        corpus_dir: Annotated[Path | None, typer.Option("--corpus", help="corpus folder (default: "
                                                                          "tests/corpus)")] = None,
        workers: Annotated[int | None, typer.Option("--workers", min=1, help="processes for the per-family fits "
                                                    "(default: one per CPU; 1 runs them in-process)")] = None,
    ) -> None:
        """Retrain the learned model from the labelled corpus, reproducibly (needs scikit-learn)."""
        from bot.diagnosis.classify import train

        argv = [*(["--output", str(output)] if output else []), *(["--corpus", str(corpus_dir)] if corpus_dir else []),
                *(["--workers", str(workers)] if workers else [])]
        raise typer.Exit(code=train.main(argv))

    app.add_typer(group, name="classify")
