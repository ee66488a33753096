"""helm lint passes and every documented configuration renders hardened, probed, least-privilege manifests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helm.chart import CHART_DIR, NAMESPACE, RELEASE, Helm, env_of, of_kind, only, parse_manifests
from tests.helm.rbac_grants import READ_VERBS, grants_from_rules
from tests.helm.scenarios import SCENARIOS

pytestmark = pytest.mark.helm

FORBIDDEN_RESOURCES = {
    "secrets",
    "pods/exec",
    "pods/attach",
    "pods/portforward",
    "pods/proxy",
    "nodes/proxy",
    "configmaps",
    "serviceaccounts/token",
    "*",
}


def _render(helm: Helm, name: str) -> list[dict[str, Any]]:
    return parse_manifests(text=helm.template(values=SCENARIOS[name]))


def _pod_spec(docs: list[dict[str, Any]], kind: str = "Deployment") -> dict[str, Any]:
    return only(docs=docs, kind=kind)["spec"]["template"]["spec"]


def _bot_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = _pod_spec(docs)["containers"]
    assert [c["name"] for c in containers] == ["triage-bot"]
    return containers[0]


def test_helm_lint_passes_on_the_chart(helm: Helm) -> None:
    result = helm.run(args=["lint", str(CHART_DIR), "--strict"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_helm_lint_passes_for_each_documented_configuration(helm: Helm, name: str, tmp_path) -> None:
    import yaml

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(SCENARIOS[name]), encoding="utf-8")
    result = helm.run(args=["lint", str(CHART_DIR), "--strict", "--values", str(values)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_container_runs_non_root_read_only_without_capabilities(helm: Helm, name: str) -> None:
    docs = _render(helm, name)
    pod_specs = [_pod_spec(docs)] + [
        doc["spec"]["template"]["spec"] for doc in of_kind(docs=docs, kind="Job")
    ]
    for pod in pod_specs:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 10001
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True
            assert context["runAsUser"] == 10001
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            assert mounts["/tmp"] == "tmp"
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert "emptyDir" in volumes["tmp"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_liveness_and_readiness_probe_the_health_endpoints_on_the_http_port(helm: Helm, name: str) -> None:
    container = _bot_container(_render(helm, name))
    assert container["ports"] == [{"name": "http", "containerPort": 3000, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["args"] == ["serve", "--port", "3000", "--no-migrate"], "replicas must never migrate"
    assert container["resources"]["requests"] and container["resources"]["limits"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_secrets_come_only_from_the_existing_secret_never_as_plain_values(helm: Helm, name: str) -> None:
    docs = _render(helm, name)
    assert not of_kind(docs=docs, kind="Secret"), "the chart must not create Secrets from values"
    expected_secret = SCENARIOS[name].get("existingSecret") or f"{RELEASE}-triage-bot"
    env = env_of(container=_bot_container(docs))
    for variable in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        if variable in env:
            assert "value" not in env[variable]
            assert env[variable]["valueFrom"]["secretKeyRef"] == {"name": expected_secret, "key": variable}


def test_default_install_is_one_http_replica_on_sqlite_with_a_kept_volume(helm: Helm) -> None:
    docs = _render(helm, "default")
    deployment = only(docs=docs, kind="Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    env = env_of(container=_bot_container(docs))
    assert env["DATABASE_URL"]["value"] == "sqlite:////data/triage.db"
    assert "SLACK_SIGNING_SECRET" in env and "SLACK_APP_TOKEN" not in env
    claim = only(docs=docs, kind="PersistentVolumeClaim")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    volumes = {v["name"]: v for v in _pod_spec(docs)["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    init = _pod_spec(docs)["initContainers"]
    assert [c["args"] for c in init] == [["db", "upgrade"]]
    assert not of_kind(docs=docs, kind="Job"), "SQLite migrates in the single pod's init container"
    assert not of_kind(docs=docs, kind="Ingress")


def test_http_mode_with_ingress_routes_only_the_slack_request_url(helm: Helm) -> None:
    docs = _render(helm, "http-ingress")
    ingress = only(docs=docs, kind="Ingress")
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "triage.example.org"
    assert [p["path"] for p in rule["http"]["paths"]] == ["/slack/events"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    service = only(docs=docs, kind="Service")
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    assert ingress["spec"]["tls"] == [{"hosts": ["triage.example.org"], "secretName": "triage-tls"}]
    assert ingress["spec"]["ingressClassName"] == "nginx"


def test_socket_mode_uses_the_app_token_and_still_probes(helm: Helm) -> None:
    docs = _render(helm, "socket")
    env = env_of(container=_bot_container(docs))
    assert env["SLACK_APP_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "slack-socket",
        "key": "SLACK_APP_TOKEN",
    }
    assert "SLACK_SIGNING_SECRET" not in env, "with both set the bot could not tell which mode to run"
    assert not of_kind(docs=docs, kind="Ingress")


def test_socket_mode_refuses_an_ingress(helm: Helm) -> None:
    result = helm.template_result(values={"mode": "socket", "ingress": {"enabled": True}})
    assert result.returncode != 0
    assert "Socket Mode dials out to Slack and needs no inbound route" in result.stderr


def test_postgresql_scales_out_and_migrates_once_in_a_hook_job(helm: Helm) -> None:
    docs = _render(helm, "postgresql-3-replicas")
    deployment = only(docs=docs, kind="Deployment")
    assert deployment["spec"]["replicas"] == 3
    assert "strategy" not in deployment["spec"], "rolling updates are fine with a shared PostgreSQL"
    pod = _pod_spec(docs)
    assert "initContainers" not in pod, "replicas must never migrate"
    assert not of_kind(docs=docs, kind="PersistentVolumeClaim")
    env = env_of(container=_bot_container(docs))
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "triage-env", "key": "DATABASE_URL"}
    job = only(docs=docs, kind="Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    job_pod = job["spec"]["template"]["spec"]
    assert job_pod["restartPolicy"] == "Never"
    assert job_pod["automountServiceAccountToken"] is False
    (container,) = job_pod["containers"]
    assert container["args"] == ["db", "upgrade"]
    assert env_of(container=container)["DATABASE_URL"] == env["DATABASE_URL"]


def test_replicas_get_a_disruption_budget_and_a_single_pod_none(helm: Helm) -> None:
    budget = only(docs=_render(helm, "postgresql-3-replicas"), kind="PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    deployment = only(docs=_render(helm, "postgresql-3-replicas"), kind="Deployment")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert not of_kind(docs=_render(helm, "default"), kind="PodDisruptionBudget")


@pytest.mark.parametrize("replicas", [2, 3, 10])
def test_more_than_one_replica_on_sqlite_is_refused_with_a_clear_message(helm: Helm, replicas: int) -> None:
    result = helm.template_result(values={"replicaCount": replicas})
    assert result.returncode != 0
    assert f"replicaCount={replicas} needs PostgreSQL" in result.stderr
    assert "Set database.type=postgresql" in result.stderr


def test_extra_read_resources_grant_only_read_on_the_named_custom_resources(helm: Helm) -> None:
    values = {"rbac": {"extraReadResources": [{"apiGroup": "serving.example.com", "resources": ["modelservers"]}]}}
    role = only(docs=parse_manifests(text=helm.template(values=values)), kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    assert {g.verb for g in grants if g.group == "serving.example.com"} == READ_VERBS
    assert {g.resource for g in grants if g.group == "serving.example.com"} == {"modelservers"}
    refused = helm.template_result(values={"rbac": {"extraReadResources": [{"apiGroup": "*", "resources": ["*"]}]}})
    assert refused.returncode != 0, "wildcards are refused by the values schema"


def test_cluster_role_is_read_only_least_privilege(helm: Helm) -> None:
    docs = _render(helm, "default")
    role = only(docs=docs, kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    assert {grant.verb for grant in grants} == READ_VERBS
    assert not {grant.resource for grant in grants} & FORBIDDEN_RESOURCES
    assert all("nonResourceURLs" not in rule and "resourceNames" not in rule for rule in role["rules"])
    assert {(grant.group, grant.resource) for grant in grants} == {
        ("", "pods"),
        ("", "pods/log"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("", "nodes"),
        ("karpenter.sh", "nodeclaims"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("jobset.x-k8s.io", "jobsets"),
        *(("kubeflow.org", plural) for plural in ("pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs", "paddlejobs",
                                                  "jaxjobs")),
        ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        ("ray.io", "rayjobs"),
        ("ray.io", "rayclusters"),
        ("serving.kserve.io", "inferenceservices"),
        ("batch.volcano.sh", "jobs"),
        ("kueue.x-k8s.io", "workloads"),
        ("aiperf.nvidia.com", "aiperfjobs"),
    }
    for grant_group_resource in {(g.group, g.resource) for g in grants}:
        assert {g.verb for g in grants if (g.group, g.resource) == grant_group_resource} == READ_VERBS
    binding = only(docs=docs, kind="ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    account = only(docs=docs, kind="ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert _pod_spec(docs)["serviceAccountName"] == account["metadata"]["name"]


def test_namespaced_rbac_renders_one_role_per_namespace_and_no_cluster_role(helm: Helm) -> None:
    docs = _render(helm, "namespaced-rbac")
    assert not of_kind(docs=docs, kind="ClusterRole") and not of_kind(docs=docs, kind="ClusterRoleBinding")
    roles = of_kind(docs=docs, kind="Role")
    bindings = of_kind(docs=docs, kind="RoleBinding")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["ml-train", "perf"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["ml-train", "perf"]
    for role in roles:
        resources = {g.resource for g in grants_from_rules(rules=role["rules"])}
        assert "nodes" not in resources, "cluster-scoped: a Role cannot grant it"
        assert {g.verb for g in grants_from_rules(rules=role["rules"])} == READ_VERBS
        assert not resources & FORBIDDEN_RESOURCES
    for binding in bindings:
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"][0]["namespace"] == NAMESPACE


def test_namespaced_rbac_without_namespaces_is_refused(helm: Helm) -> None:
    result = helm.template_result(values={"rbac": {"namespaced": True}})
    assert result.returncode != 0
    assert "rbac.namespaced=true needs rbac.namespaces" in result.stderr


def test_a_grace_period_shorter_than_the_snapshot_deadline_is_refused(helm: Helm) -> None:
    result = helm.template_result(
        values={"terminationGracePeriodSeconds": 20, "config": {"snapshotDeadlineSeconds": 30}}
    )
    assert result.returncode != 0
    assert "terminationGracePeriodSeconds=20 must exceed config.snapshotDeadlineSeconds=30" in result.stderr
    accepted = helm.template_result(
        values={"terminationGracePeriodSeconds": 31, "config": {"snapshotDeadlineSeconds": 30}}
    )
    assert accepted.returncode == 0, accepted.stderr


def test_the_image_defaults_to_the_chart_app_version_and_can_be_pinned(helm: Helm) -> None:
    default = _bot_container(_render(helm, "default"))
    assert default["image"] == "ghcr.io/triage-bot/triage-bot:0.1.0"
    pinned = parse_manifests(
        text=helm.template(
            values={
                "image": {"repository": "registry.local/triage", "tag": "sha-abc", "pullPolicy": "Always"},
                "imagePullSecrets": [{"name": "regcred"}],
            }
        )
    )
    container = _bot_container(pinned)
    assert (container["image"], container["imagePullPolicy"]) == ("registry.local/triage:sha-abc", "Always")
    assert _pod_spec(pinned)["imagePullSecrets"] == [{"name": "regcred"}]


def test_an_existing_service_account_is_used_and_bound_instead_of_creating_one(helm: Helm) -> None:
    docs = parse_manifests(
        text=helm.template(values={"serviceAccount": {"create": False, "name": "platform-reader"}})
    )
    assert not of_kind(docs=docs, kind="ServiceAccount")
    assert _pod_spec(docs)["serviceAccountName"] == "platform-reader"
    assert only(docs=docs, kind="ClusterRoleBinding")["subjects"][0]["name"] == "platform-reader"


def test_rbac_can_be_left_to_the_cluster_admin(helm: Helm) -> None:
    docs = parse_manifests(text=helm.template(values={"rbac": {"create": False}}))
    assert not {doc["kind"] for doc in docs} & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


RESTRICTED_VOLUME_TYPES = {
    "emptyDir",
    "persistentVolumeClaim",
    "configMap",
    "secret",
    "projected",
    "downwardAPI",
    "ephemeral",
    "csi",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_pods_meet_the_restricted_pod_security_standard(helm: Helm, name: str) -> None:
    docs = _render(helm, name)
    for pod in [_pod_spec(docs)] + [
        doc["spec"]["template"]["spec"] for doc in of_kind(docs=docs, kind="Job")
    ]:
        assert not any(pod.get(flag) for flag in ("hostNetwork", "hostPID", "hostIPC"))
        for volume in pod["volumes"]:
            assert set(volume) - {"name"} <= RESTRICTED_VOLUME_TYPES, volume
        for container in pod.get("initContainers", []) + pod["containers"]:
            assert all("hostPort" not in port for port in container.get("ports", []))
            assert container["securityContext"].get("privileged") is False
