"""Which workload a pod belongs to, for alerts that name only a pod: one bounded GET of the pod."""

from __future__ import annotations

from typing import Any

from bot.config import Settings
from bot.diagnosis.collectors.kube.calls import Caller, ObjectNotFound, build_api_client
from bot.diagnosis.collectors.kube.node_plan import workload_of
from bot.diagnosis.engine import Budget, CollectorFailure


class OwnerUnknown(LookupError):
    """The pod could not be read (gone, forbidden, cluster unreachable); the message says which."""


def owner_of_pod(*, namespace: str, pod: str, settings: Settings, api_client: Any = None) -> tuple[str, str]:
    """(kind, name) of the pod's workload from its training/job labels or controller; raises OwnerUnknown.
    `namespace` and `pod` are validated names (they are path parameters, never a URL of the caller's)."""
    budget = Budget(bounds=settings.bounds.model_copy(update={"deadline_seconds": settings.bounds.call_timeout_seconds}))
    try:
        api = api_client or build_api_client(kubeconfig=settings.kubeconfig, context=settings.kube_context,
                                             in_cluster=settings.in_cluster, pool_size=1)
    except Exception as error:  # noqa: BLE001 - no credentials is an answer, not a crash
        raise OwnerUnknown(f"no Kubernetes credentials to read pod {namespace}/{pod}: {error}"[:300]) from None
    try:
        found = Caller(api=api, budget=budget).get(
            "/api/v1/namespaces/{namespace}/pods/{name}", path_params={"namespace": namespace, "name": pod},
            what=f"get pod {namespace}/{pod}")
        return workload_of(found)
    except ObjectNotFound:
        raise OwnerUnknown(f"pod {namespace}/{pod} no longer exists, so its workload is unknown") from None
    except CollectorFailure as error:
        raise OwnerUnknown(error.detail) from None
    except Exception as error:  # noqa: BLE001 - unreachable, timeout: say so
        raise OwnerUnknown(f"could not read pod {namespace}/{pod}: {error}"[:300]) from None
    finally:
        if api_client is None:
            api.close()
