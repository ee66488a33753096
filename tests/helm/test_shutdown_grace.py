"""serve's own shutdown grace ends before Kubernetes kills the pod, whatever grace period the chart sets."""

from __future__ import annotations

from tests.helm.chart import Helm, env_of, only, parse_manifests


def test_the_bots_shutdown_grace_is_five_seconds_inside_the_pods_termination_grace(helm: Helm) -> None:
    for grace in (45, 90):
        docs = parse_manifests(text=helm.template(values={"terminationGracePeriodSeconds": grace}))
        pod = only(docs=docs, kind="Deployment")["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == grace
        env = env_of(container=pod["containers"][0])
        assert env["TRIAGE_SHUTDOWN_GRACE_SECONDS"]["value"] == str(grace - 5)
