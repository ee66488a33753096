"""What the bot's identity may do on one lab cluster, as RBAC would say: allow rules only (no denies), each
cluster-wide or bound in some namespaces. The lab API server enforces them on every read and answers
SelfSubjectAccessReview and SelfSubjectRulesReview from the same rules, so a review never disagrees with what
a read then gets."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

READ_VERBS = ("get", "list", "watch")
SUBJECT = "system:serviceaccount:triage:triage-bot"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """One PolicyRule: apiGroups x resources x verbs ('*' wildcards), in `namespaces` (None: cluster-wide)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...] = READ_VERBS
    namespaces: tuple[str, ...] | None = None

    def allows(self, *, group: str, resource: str, verb: str, namespace: str) -> bool:
        """Whether this rule grants the request (`namespace` "" means all namespaces or cluster-scoped)."""
        if self.namespaces is not None and (not namespace or namespace not in self.namespaces):
            return False
        return (("*" in self.api_groups or group in self.api_groups)
                and ("*" in self.resources or resource in self.resources)
                and ("*" in self.verbs or verb in self.verbs))

    def to_wire(self) -> dict[str, Any]:
        """As a ResourceRule of a SelfSubjectRulesReview."""
        return {"verbs": list(self.verbs), "apiGroups": list(self.api_groups), "resources": list(self.resources)}


@dataclasses.dataclass(kw_only=True)
class Rbac:
    """The bot identity's rules on one cluster; starts as read-everything."""

    rules: list[Rule] = dataclasses.field(
        default_factory=lambda: [Rule(api_groups=("*",), resources=("*",))])

    def allows(self, *, group: str, resource: str, verb: str, namespace: str) -> bool:
        """RBAC's answer: some rule grants it."""
        return any(rule.allows(group=group, resource=resource, verb=verb, namespace=namespace) for rule in self.rules)

    def revoke(self, *, group: str, resource: str, served: Iterable[tuple[str, str]]) -> None:
        """Stop granting one resource everywhere: wildcard rules become explicit lists of the other served
        resources (RBAC has no deny rule, so this is what an operator's narrower Role looks like)."""
        kept: list[Rule] = []
        for rule in self.rules:
            if not rule.allows(group=group, resource=resource, verb=rule.verbs[0], namespace=_any(rule)):
                kept.append(rule)
                continue
            for other_group, other in sorted(set(served)):
                if (other_group, other) != (group, resource) and rule.allows(
                        group=other_group, resource=other, verb=rule.verbs[0], namespace=_any(rule)):
                    kept.append(dataclasses.replace(rule, api_groups=(other_group,), resources=(other,)))
        self.rules = kept

    def access_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The status of a SelfSubjectAccessReview for `spec`."""
        attributes = spec.get("resourceAttributes")
        if not isinstance(attributes, dict):
            return {"allowed": True, "reason": "non-resource URLs are readable in the lab"}
        resource = str(attributes.get("resource") or "")
        if attributes.get("subresource"):
            resource = f"{resource}/{attributes['subresource']}"
        group, verb = str(attributes.get("group") or ""), str(attributes.get("verb") or "")
        namespace = str(attributes.get("namespace") or "")
        if self.allows(group=group, resource=resource, verb=verb, namespace=namespace):
            return {"allowed": True, "reason": f'RBAC: allowed by ClusterRoleBinding "triage-bot-read" of {SUBJECT}'}
        where = f' in the namespace "{namespace}"' if namespace else ""
        return {"allowed": False, "reason": f'RBAC: {SUBJECT} cannot {verb} resource "{resource}" in API group '
                                            f'"{group}"{where}'}

    def rules_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The status of a SelfSubjectRulesReview in `spec.namespace`: cluster-wide rules plus that namespace's."""
        namespace = str(spec.get("namespace") or "")
        rules = [rule.to_wire() for rule in self.rules if rule.namespaces is None or namespace in rule.namespaces]
        rules.append({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                      "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})
        return {"resourceRules": rules, "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version",
                                                                                                   "/api", "/apis"]}],
                "incomplete": False}


def _any(rule: Rule) -> str:
    return rule.namespaces[0] if rule.namespaces else ""


def request_access(*, group: str, plural: str, name: str | None, sub: str | None) -> tuple[str, str, str]:
    """(group, resource, verb) RBAC checks for one GET: `pods/log` for logs, list without a name."""
    resource = f"{plural}/{sub}" if sub else plural
    return group, resource, "get" if name else "list"
