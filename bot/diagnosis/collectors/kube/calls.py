"""Bounded calls to the Kubernetes API with the real client: timeouts from the budget, paging, error mapping."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from bot.diagnosis.engine import Budget, CollectorFailure, DeadlineExceeded
from bot.evidence.findings import CollectorOutcome, Observation, utcnow
from bot.evidence.report import SnapshotUnavailable


class ClusterUnreachable(SnapshotUnavailable, ConnectionError):
    """The API server did not answer at all (refused, DNS, TLS, timeout on connect)."""


class ObjectNotFound(LookupError):
    """The named object does not exist (404 with details naming it)."""


class GroupNotServed(LookupError):
    """The API group or resource is not served (404 without object details: CRD not installed)."""


def build_api_client(*, kubeconfig: Path | None, context: str | None, in_cluster: bool,
                     pool_size: int) -> client.ApiClient:
    """A client for one cluster from a kubeconfig (or in-cluster service account); no global state."""
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None, context=context,
                                client_configuration=configuration, persist_config=False)
    configuration.connection_pool_maxsize = pool_size
    configuration.retries = urllib3.Retry(total=1, connect=1, read=0, status=0, redirect=0)
    return client.ApiClient(configuration)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Caller:
    """Makes GETs through the client's ApiClient inside a budget, and maps client errors to report outcomes.

    It uses the ApiClient's own request, authentication and transport, and answers with the wire (camelCase)
    JSON the collectors read, checked for shape here. It builds neither the generated CoreV1Api/BatchV1Api
    classes nor the typed models: in this client they are pydantic classes, and building the ~220 a pod
    list needs costs about a quarter of a second of CPU per process, only to be turned back into the wire
    dicts the collectors read. (The lab's stand-in objects are still held to those models by a test.)
    """

    api: client.ApiClient
    budget: Budget

    def get(self, path: str, *, what: str, text: bool = False, path_params: dict[str, str] | None = None,
            query: dict[str, Any] | None = None, max_bytes: int | None = None) -> Any:
        """One GET with a timeout that never passes the deadline: a JSON object as a dict (or, with `text`, a str).

        The body is read as it streams in, never past `max_bytes` (default: the bounds' per-response cap) nor
        past the deadline, so a server that ignores `limit` or `limitBytes`, or drips a byte a second, costs
        at most that much memory and time. Text (`str`) is cut at the cap; anything else over it is refused.
        """
        timeout = self.budget.call_timeout()
        params = [(key, value) for key, value in (query or {}).items() if value is not None]
        accept = "text/plain" if text else "application/json"
        try:
            request = self.api.param_serialize(method="GET", resource_path=path, path_params=path_params or {},
                                               query_params=params, header_params={"Accept": accept},
                                               auth_settings=["BearerToken"])
            response = self.api.call_api(*request, _request_timeout=(min(timeout, 3.0), timeout))
            self._read_bounded(response, what=what, text=text,
                               max_bytes=max_bytes or self.budget.bounds.max_response_bytes)
            found = self.api.response_deserialize(response_data=response,
                                                  response_types_map={"200": "str" if text else "object"}).data
        except ApiException as exc:
            raise _mapped(exc, what=what) from None
        except urllib3.exceptions.MaxRetryError as exc:
            if isinstance(exc.reason, urllib3.exceptions.ReadTimeoutError):
                raise DeadlineExceeded(f"{what}: no answer within {timeout:.1f}s") from None
            raise ClusterUnreachable(f"{what}: {exc.reason}") from None
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise DeadlineExceeded(f"{what}: no answer within {timeout:.1f}s") from None
        except urllib3.exceptions.HTTPError as exc:
            raise ClusterUnreachable(f"{what}: {exc}") from None
        except ValueError:  # a body that is not JSON (a proxy's HTML page, a cut answer)
            found = None
        if not text and not isinstance(found, dict):
            raise CollectorFailure(outcome=CollectorOutcome.ERROR,
                                   detail=f"{what}: the answer is not a JSON object; not read")
        return found

    def _read_bounded(self, response: Any, *, what: str, text: bool, max_bytes: int) -> None:
        """Fill `response.data` chunk by chunk (whatever each recv brings), checking the byte cap and the
        deadline after every chunk; on either, the connection is dropped so nothing keeps reading."""
        raw = response.response
        chunks: list[bytes] = []
        size = 0
        finished = False
        try:
            while size < max_bytes:
                if self.budget.remaining() <= 0.0:
                    raise DeadlineExceeded(f"{what}: the answer was still arriving at the snapshot deadline")
                chunk = raw.read1(min(65_536, max_bytes - size))
                if not chunk:
                    finished = True
                    break
                chunks.append(chunk)
                size += len(chunk)
            if not finished and not text and raw.read1(1):
                raise CollectorFailure(
                    outcome=CollectorOutcome.ERROR,
                    detail=f"{what}: the answer is larger than {max_bytes} bytes; not read further",
                )
            finished = finished or text
        finally:
            if finished and size < max_bytes:
                raw.release_conn()
            else:
                raw.close()  # cut off mid-body: the connection cannot be reused
        data = b"".join(chunks)
        # A cut can split a UTF-8 character; the client decodes strictly.
        response.data = data.decode("utf-8", "replace").encode("utf-8") if text else data

    def list_all(self, path: str, *, what: str, path_params: dict[str, str] | None = None,
                 query: dict[str, Any] | None = None,
                 max_items: int | None = None) -> tuple[list[dict[str, Any]], bool]:
        """Page a list with limit/continue up to the per-list cap; returns (items, truncated)."""
        cap = max_items or self.budget.bounds.max_items_per_list
        items: list[Any] = []
        token: str | None = None
        while True:
            limit = min(self.budget.bounds.page_size, cap - len(items))
            page_query = {**(query or {}), "limit": limit, "continue": token}
            result = self.get(path, what=what, path_params=path_params, query=page_query)
            page, metadata = result.get("items") or [], result.get("metadata") or {}
            if not isinstance(page, list) or not all(isinstance(item, dict) for item in page) \
                    or not isinstance(metadata, dict):
                raise CollectorFailure(outcome=CollectorOutcome.ERROR,
                                       detail=f"{what}: the answer is not a list of objects; not read")
            token = metadata.get("continue") or None
            items.extend(page[:limit])  # a server that ignores `limit` still gives no more than asked for
            if len(page) > limit:
                return items, True
            if not token:
                return items, False
            if len(items) >= cap:
                return items, True


def _mapped(exc: ApiException, *, what: str) -> Exception:
    body: dict[str, Any] = {}
    try:
        body = json.loads(exc.body or "{}")
    except (ValueError, TypeError):
        body = {}
    message = body.get("message") or exc.reason or ""
    if exc.status == 403:
        return CollectorFailure(outcome=CollectorOutcome.FORBIDDEN, detail=f"{what}: forbidden (403): {message}"[:300])
    if exc.status == 404:
        if body.get("details", {}).get("name"):
            return ObjectNotFound(f"{what}: {message}")
        return GroupNotServed(f"{what}: the API server does not serve it (404)")
    if exc.status in (408, 504):
        return DeadlineExceeded(f"{what}: server timeout ({exc.status})")
    return CollectorFailure(outcome=CollectorOutcome.ERROR, detail=f"{what}: HTTP {exc.status}: {message}"[:300])


def parse_time(value: Any) -> datetime:
    """A wire timestamp (or None) to an aware datetime; now when absent."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return utcnow()
    return utcnow()


def observation(*, kind: str, subject: str, text: str, command: str, fields: dict[str, Any],
                observed_at: Any = None, source: str = "kubernetes") -> Observation:
    """Build one observation with a parsed timestamp."""
    return Observation(source=source, kind=kind, subject=subject, text=text, command=command,
                       observed_at=parse_time(observed_at), fields=fields)
