"""Slurm REST backend: slurmrestd over HTTP with a JWT (`X-SLURM-USER-TOKEN`), for a bot on another host.

Speaks the OpenAPI plugin v0.0.38 (Slurm 22.05) paths, and reads the later plugins' number objects
(`{"set": true, "number": N}`) and state lists where they differ.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import requests

from bot.diagnosis.collectors.slurm import parse
from bot.diagnosis.collectors.slurm.model import (
    Accounting,
    Fetched,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmStep,
)

_MAX_BODY_BYTES_DEFAULT = 4_000_000


class RestBackend:
    """Reads Slurm from slurmrestd; every call is bounded by a timeout and a body size cap."""

    name = "rest"

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        user: str | None,
        timeout_seconds: float,
        max_bytes: int = _MAX_BODY_BYTES_DEFAULT,
        api_version: str = "v0.0.38",
        session: requests.Session | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {"X-SLURM-USER-TOKEN": token, "Accept": "application/json"}
        if user:
            self._headers["X-SLURM-USER-NAME"] = user
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._api = api_version
        self._session = session or requests.Session()

    def _get(self, path: str) -> tuple[dict[str, Any] | None, str, str]:
        """GET one path; returns (body, shown command, error). Reads at most max_bytes."""
        url = f"{self._base}{path}"
        shown = f"curl -H 'X-SLURM-USER-TOKEN: ...' {url}"
        try:
            with self._session.get(
                url, headers=self._headers, timeout=self._timeout, stream=True
            ) as response:
                body = bytearray()
                for chunk in response.iter_content(chunk_size=65536):
                    body.extend(chunk)
                    if len(body) > self._max_bytes:
                        return None, shown, f"response larger than {self._max_bytes} bytes"
                status = response.status_code
        except requests.Timeout:
            return None, shown, f"slurmrestd did not answer within {self._timeout:g}s"
        except requests.RequestException as error:
            return None, shown, f"slurmrestd unreachable: {type(error).__name__}"
        if status in (401, 403):
            return (
                None,
                shown,
                f"slurmrestd refused the token (HTTP {status}): check SLURM_JWT and the user name",
            )
        try:
            data = json.loads(bytes(body))
        except ValueError:
            return None, shown, f"slurmrestd answered HTTP {status} with a body that is not JSON"
        if not isinstance(data, dict):
            return None, shown, f"slurmrestd answered HTTP {status} with unexpected JSON"
        return data, shown, ""

    def get_json(self, path: str) -> tuple[dict[str, Any] | None, str, str]:
        """One bounded GET of an API path (`/slurm/<v>/jobs`): (body, shown command, error)."""
        return self._get(f"/slurm/{self._api}{path}")

    def version(self) -> Fetched[str | None]:
        """From any response's `meta.Slurm.release`."""
        data, shown, error = self._get(f"/slurm/{self._api}/diag")
        release = ((data or {}).get("meta", {}).get("Slurm", {}) or {}).get("release")
        return Fetched(data=release, command=shown, error=error)

    def ping(self) -> Fetched[str | None]:
        """`GET /slurm/<v>/ping`: whether slurmrestd takes the token and its controller answers."""
        data, shown, error = self._get(f"/slurm/{self._api}/ping")
        pings = [item for item in (data or {}).get("pings") or [] if isinstance(item, dict)]
        up = [f"{item.get('hostname')} {item.get('ping')}" for item in pings if str(item.get("ping")).upper() == "UP"]
        if not error and not up:
            error = _errors(data or {}) or "the controller did not answer slurmrestd's ping"
        return Fetched(data=", ".join(up) or None, command=shown, error=error)

    def private_data(self) -> Fetched[str | None]:
        """slurmrestd does not state PrivateData: reads are what the token's user may see."""
        return Fetched(data=None, command="", error="")

    def job(self, *, job_id: str) -> Fetched[SlurmJob | None]:
        """`GET /slurm/<v>/job/<id>`; None when slurmrestd reports an invalid job id."""
        data, shown, error = self._get(f"/slurm/{self._api}/job/{job_id}")
        if data is None:
            return Fetched(data=None, command=shown, error=error)
        jobs = data.get("jobs") or []
        if not jobs:
            errors = _errors(data)
            # 2017 = ESLURM_INVALID_JOB_ID: the controller answered and does not know the job. A rejected or
            # expired token surfaces as error -1 "Unspecified error" with the same "Unable to find" text.
            if _error_numbers(data) & {2017} or "Invalid job id" in errors:
                return Fetched(data=None, command=shown, excerpt=errors)
            hint = " (slurmrestd could not ask the controller: check that the token is valid and not expired)"
            return Fetched(
                data=None,
                command=shown,
                excerpt=errors,
                error=(errors or "slurmrestd returned no job") + hint,
            )
        return Fetched(data=job_from_rest(jobs[0]), command=shown, excerpt=_excerpt(jobs[0]))

    def partition(self, *, name: str) -> Fetched[SlurmPartition | None]:
        """`GET /slurm/<v>/partition/<name>`."""
        data, shown, error = self._get(f"/slurm/{self._api}/partition/{name}")
        items = (data or {}).get("partitions") or []
        return Fetched(
            data=partition_from_rest(items[0]) if items else None,
            command=shown,
            excerpt=_excerpt(items[0]) if items else _errors(data or {}),
            error=error,
        )

    def nodes(self, *, names: list[str]) -> Fetched[list[SlurmNode]]:
        """`GET /slurm/<v>/node/<name>` per node (the caller bounds the count)."""
        nodes: list[SlurmNode] = []
        errors: list[str] = []
        shown = f"curl -H 'X-SLURM-USER-TOKEN: ...' {self._base}/slurm/{self._api}/node/<name>"
        for name in names:
            data, shown_one, error = self._get(f"/slurm/{self._api}/node/{name}")
            if error:
                errors.append(f"{name}: {error}")
            nodes.extend(node_from_rest(item) for item in (data or {}).get("nodes") or [])
            if len(names) == 1:
                shown = shown_one
        return Fetched(data=nodes, command=shown, error="; ".join(errors))

    def partition_node_states(self, *, name: str) -> Fetched[dict[str, int]]:
        """Not read over REST: v0.0.38 would have to list every node of the cluster to count them."""
        return Fetched(
            data={},
            command=f"sinfo -p {name} -o '%T %D'",
            error="node state counts are not read over slurmrestd (it would list every node)",
        )

    def steps(self, *, job_id: str) -> Fetched[list[SlurmStep]]:
        """slurmrestd's v0.0.38 has no live-step endpoint: say so rather than guess."""
        return Fetched(
            data=[],
            command=f"scontrol show step {job_id}",
            error="live steps are not exposed by slurmrestd; run the command on a login node",
        )

    def accounting(self, *, job_id: str) -> Fetched[Accounting]:
        """`GET /slurmdb/<v>/job/<id>`; accounting is off when slurmrestd has no slurmdbd plugin."""
        data, shown, error = self._get(f"/slurmdb/{self._api}/job/{job_id}")
        if data is None:
            return Fetched(data=Accounting(enabled=False, message=error), command=shown)
        jobs = data.get("jobs") or []
        if not jobs:
            message = _errors(data) or "slurmdbd returned no record for this job"
            return Fetched(data=Accounting(enabled=False, message=message), command=shown, excerpt=message)
        steps: list[SlurmStep] = []
        for job in jobs:
            for step in job.get("steps") or []:
                step_info = step.get("step") or {}
                exit_code = step.get("exit_code") or {}
                steps.append(
                    SlurmStep(
                        step_id=str(step_info.get("id") or step_info.get("name") or ""),
                        name=str(step_info.get("name") or ""),
                        state=_state(step.get("state")),
                        exit_code=_number(exit_code.get("return_code")),
                        exit_signal=_number((exit_code.get("signal") or {}).get("signal_id"))
                        if isinstance(exit_code.get("signal"), dict)
                        else None,
                        nodelist=(step.get("nodes") or {}).get("range"),
                    )
                )
        return Fetched(data=Accounting(enabled=True, steps=tuple(steps)), command=shown)


def _errors(data: dict[str, Any]) -> str:
    return "; ".join(
        f"{item.get('error', '')}: {item.get('description', '')}".strip(": ")
        for item in data.get("errors") or []
        if isinstance(item, dict)
    )


def _error_numbers(data: dict[str, Any]) -> set[int]:
    return {
        int(item["error_number"])
        for item in data.get("errors") or []
        if isinstance(item, dict) and isinstance(item.get("error_number"), int)
    }


def _excerpt(item: dict[str, Any]) -> str:
    keys = (
        "job_id",
        "job_state",
        "state_reason",
        "state_description",
        "partition",
        "nodes",
        "name",
        "state",
        "state_flags",
        "reason",
        "exit_code",
        "tres_req_str",
        "tres_alloc_str",
        "gres",
        "gres_used",
    )
    return ", ".join(f"{key}={item[key]}" for key in keys if key in item)


def _number(raw: Any) -> int | None:
    """v0.0.38 plain numbers, or v0.0.39+ `{"set": bool, "infinite": bool, "number": n}`."""
    if isinstance(raw, dict):
        if not raw.get("set", True) or raw.get("infinite"):
            return None
        raw = raw.get("number")
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def _time(raw: Any) -> datetime | None:
    number = _number(raw)
    return datetime.fromtimestamp(number, UTC) if number else None


def _state(raw: Any) -> str:
    """v0.0.38 `"PENDING"`; later versions a list like `["PENDING"]`."""
    if isinstance(raw, list):
        return str(raw[0]) if raw else ""
    return str(raw or "")


def _text(raw: Any) -> str | None:
    text = str(raw).strip() if raw is not None else ""
    return text or None


def _wait_status(raw: Any) -> tuple[int | None, int | None]:
    """v0.0.38 gives the raw wait status (768 = exit 3); later versions an object."""
    if isinstance(raw, dict):
        return _number(raw.get("return_code")), _number((raw.get("signal") or {}).get("id"))
    number = _number(raw)
    if number is None:
        return None, None
    return (number >> 8) & 0xFF, number & 0x7F


def job_from_rest(item: dict[str, Any]) -> SlurmJob:
    """One slurmrestd job object into the shared job shape."""
    state = _state(item.get("job_state"))
    description = _text(item.get("state_description"))
    reason_code = _text(item.get("state_reason"))
    if reason_code == "None":
        reason_code = None
    reason_raw = description or reason_code
    _, unavailable = parse.parse_reason(description) if description else (None, [])
    exit_code, exit_signal = _wait_status(item.get("exit_code"))
    derived, _ = _wait_status(item.get("derived_exit_code"))
    nodelist = _text(item.get("nodes"))
    time_limit = _number(item.get("time_limit"))
    gres_req = next(
        (
            _text(item.get(key))
            for key in ("tres_per_node", "tres_per_job", "tres_per_task")
            if _text(item.get(key))
        ),
        None,
    )
    return SlurmJob(
        job_id=str(item.get("job_id", "")),
        name=str(item.get("name", "")),
        user=str(item.get("user_name", "")),
        uid=item["user_id"] if isinstance(item.get("user_id"), int) else None,
        state=state,
        reason_raw=reason_raw,
        reason_code=reason_code,
        unavailable_nodes=tuple(unavailable),
        partition=_text(item.get("partition")),
        qos=_text(item.get("qos")),
        account=_text(item.get("account")),
        nodelist=nodelist,
        nodes=tuple(parse.expand_hostlist(nodelist, limit=1000)) if nodelist else (),
        req_nodes=tuple(parse.expand_hostlist(_text(item.get("required_nodes")) or "", limit=1000)),
        exc_nodes=tuple(parse.expand_hostlist(_text(item.get("excluded_nodes")) or "", limit=1000)),
        dependency=_text(item.get("dependency")),
        submit_time=_time(item.get("submit_time")),
        eligible_time=_time(item.get("eligible_time")),
        start_time=_time(item.get("start_time")),
        end_time=_time(item.get("end_time")),
        time_limit=str(time_limit) if time_limit is not None else "UNLIMITED",
        time_limit_minutes=time_limit,
        num_nodes=_number(item.get("node_count")),
        num_cpus=_number(item.get("cpus")),
        tres_req=parse.parse_tres(_text(item.get("tres_req_str"))),
        tres_alloc=parse.parse_tres(_text(item.get("tres_alloc_str"))),
        gres_req=gres_req,
        gres_alloc=tuple(str(entry) for entry in item.get("gres_detail") or []),
        exit_code=exit_code,
        exit_signal=exit_signal,
        derived_exit_code=derived,
        batch_host=_text(item.get("batch_host")),
        restarts=_number(item.get("restart_cnt")),
        work_dir=_text(item.get("current_working_directory")),
        std_out=_text(item.get("standard_output")),
        array_job_id=str(_number(item.get("array_job_id"))) if _number(item.get("array_job_id")) else None,
        array_task_id=_text(item.get("array_task_string"))
        or (
            str(_number(item.get("array_task_id")))
            if _number(item.get("array_task_id")) is not None
            else None
        ),
    )


def node_from_rest(item: dict[str, Any]) -> SlurmNode:
    """One slurmrestd node object."""
    state = item.get("state")
    if isinstance(state, list):  # later versions: ["DOWN", "DRAIN"]
        base, flags = (str(state[0]).upper() if state else ""), tuple(str(flag).upper() for flag in state[1:])
    else:
        base, flags = (
            str(state or "").upper(),
            tuple(str(flag).upper() for flag in item.get("state_flags") or []),
        )
    return SlurmNode(
        name=str(item.get("name", "")),
        state=base,
        state_flags=flags,
        reason=_text(item.get("reason")),
        reason_set_by=_text(item.get("reason_set_by_user")),
        reason_time=_time(item.get("reason_changed_at")),
        gres=_text(item.get("gres")),
        gres_used=_text(item.get("gres_used")),
        cfg_tres=parse.parse_tres(_text(item.get("tres"))),
        alloc_tres=parse.parse_tres(_text(item.get("tres_used"))),
        partitions=tuple(str(name) for name in item.get("partitions") or []),
    )


def partition_from_rest(item: dict[str, Any]) -> SlurmPartition:
    """One slurmrestd partition object (v0.0.38 flat keys)."""
    max_time = _number(item.get("max_time_limit"))
    max_nodes = _number(item.get("maximum_nodes_per_job"))
    state = item.get("state")
    return SlurmPartition(
        name=str(item.get("name", "")),
        state=_state(state).upper(),
        nodes=_text(item.get("nodes")),
        total_nodes=_number(item.get("total_nodes")),
        total_cpus=_number(item.get("total_cpus")),
        min_nodes=_number(item.get("min nodes per job", item.get("minimum_nodes_per_job"))),
        max_nodes=max_nodes if max_nodes is not None and max_nodes >= 0 else None,
        max_time=str(max_time) if max_time is not None else "UNLIMITED",
        max_time_minutes=max_time,
        default_time=_text(item.get("default_time_limit")),
        allow_accounts=_text(item.get("allowed_accounts")),
        allow_qos=_text(item.get("allowed_qos")),
        qos=_text(item.get("qos")),
        max_cpus_per_node=_text(item.get("maximum_cpus_per_node")),
        max_mem_per_node=_text(item.get("maximum_memory_per_node")),
        tres=parse.parse_tres(_text(item.get("tres"))),
    )
