"""`/triage config`: per-channel settings. `config cluster <name>` sets the cluster an id without `<cluster>:`
means in this channel (stored, so every replica and restart agrees); `config cluster` shows it and the list."""

from __future__ import annotations

from bot import markup
from bot.evidence.targets import CLUSTER_NAME, Platform
from handlers.slack import replies
from handlers.slack.router import CommandContext, Subcommand, UsageError, safe_echo

CLUSTER_WORD = "cluster"
CLEAR_WORD = "none"
USAGE = (
    f"Type `/triage config {CLUSTER_WORD} <name>` to set this channel's default cluster, "
    f"`/triage config {CLUSTER_WORD}` to see it and the clusters, or `/triage config {CLUSTER_WORD} {CLEAR_WORD}` "
    "to clear it."
)


def _parse(rest: str) -> str | None:
    """The cluster name to set (`none` clears), or None to show the current setting."""
    words = rest.split()
    if not words or words[0].lower() != CLUSTER_WORD or len(words) > 2:
        raise UsageError(USAGE)
    if len(words) == 1:
        return None
    name = words[1]
    if name.lower() == CLEAR_WORD:
        return CLEAR_WORD
    if not name.isascii() or not CLUSTER_NAME.fullmatch(name):
        raise UsageError(f"`{safe_echo(name)}` is not a cluster name: lowercase letters, digits and '-', starting "
                         f"with a letter. {USAGE}")
    return name


def _check(rest: str) -> None:
    _parse(rest)


def _kind(platform: Platform) -> str:
    return "Kubernetes" if platform is Platform.KUBERNETES else "Slurm"


def _run(ctx: CommandContext) -> None:
    wanted = _parse(ctx.rest)
    services = ctx.services
    clusters = services.core.clusters
    if wanted is None:
        current = services.incidents.channel_cluster(channel_id=ctx.channel_id)
        lines = []
        for spec in clusters.specs:
            marked = ", default" if clusters.default_for(spec.platform) is spec and len(clusters.of(spec.platform)) > 1 else ""
            lines.append(markup.format("• `{}` ({}{}): {}", spec.name, _kind(spec.platform), marked,
                                       spec.describe()[:80]))
        ctx.reply_ephemeral(
            markup.format("This channel's default cluster: *{}*. Ids name a cluster as `{}` (e.g. `/triage job {}`); "
                          "without one they mean the channel's default, else the only (or default) cluster of their "
                          "kind.\n", current or "none", "<cluster>:<id>", f"{clusters.names[0]}:ml/train-llm")
            + markup.join("\n", lines))
        return
    cluster = None if wanted == CLEAR_WORD else wanted
    previous = services.incidents.set_channel_cluster(channel_id=ctx.channel_id, cluster=cluster, actor=ctx.user_id)
    if cluster is None:
        text = markup.format("<@{}> cleared this channel's default cluster (was {}): ids without `{}` mean the only "
                             "(or default) cluster of their kind again.", ctx.user_id, previous or "none", "<cluster>:")
    else:
        spec = clusters.get(cluster)
        example = "ml/train-llm" if spec.platform is Platform.KUBERNETES else "88123"
        text = markup.format("<@{}> set this channel's default cluster to *{}* (was {}): {} ids without `{}` now mean "
                             "{} here, e.g. `/triage job {}`.", ctx.user_id, spec.name, previous or "none",
                             _kind(spec.platform), "<cluster>:", spec.name, example)
    replies.post_message(ctx.client, channel=ctx.channel_id, text=text)


SUBCOMMANDS = (
    Subcommand(
        name="config",
        usage=f"config {CLUSTER_WORD} [<name>|{CLEAR_WORD}]",
        summary="this channel's default cluster: ids without `<cluster>:` mean it here (stored)",
        run=_run,
        check=_check,
    ),
)
