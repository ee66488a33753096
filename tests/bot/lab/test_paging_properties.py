"""Paging with any page size returns every matching item exactly once, in a stable order."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.lab import objects as o
from bot.lab.kube_api import ClusterState, KubeApiServer


def _server(count: int) -> KubeApiServer:
    state = ClusterState()
    for index in range(count):
        state.add(o.pod(namespace="ns", name=f"p-{index:04d}", node_name="n",
                        containers=[o.container(name="c", image="busybox:1.36")],
                        labels={"even": str(index % 2 == 0).lower()}))
    return KubeApiServer(state=state)


@settings(max_examples=40, deadline=None)
@given(count=st.integers(min_value=0, max_value=60), limit=st.integers(min_value=1, max_value=25),
       selector=st.sampled_from(["", "even=true", "even!=true"]))
def test_every_page_size_returns_each_item_once(count: int, limit: int, selector: str) -> None:
    server = _server(count)
    try:
        names: list[str] = []
        token = ""
        while True:
            query = {"limit": [str(limit)], "labelSelector": [selector]}
            if token:
                query["continue"] = [token]
            status, _, body = server.respond(path="/api/v1/namespaces/ns/pods", query=query, accept="application/json")
            page = json.loads(body)
            assert status == 200 and len(page["items"]) <= limit
            names += [item["metadata"]["name"] for item in page["items"]]
            token = page["metadata"].get("continue", "")
            if not token:
                break
    finally:
        server.stop()
    expected = [f"p-{i:04d}" for i in range(count)
                if selector == "" or (selector == "even=true") == (i % 2 == 0)]
    assert names == expected
