"""``/v1/threads`` on the real gateway, with curl's view (httpx) and the remote run service's."""

from __future__ import annotations

import httpx
import pytest

from loopgate.contracts.ports import ThreadExists
from loopgate.gateway.client import RemoteService

pytestmark = pytest.mark.anyio


async def test_record_look_up_list_and_forget_over_http(gateway: str) -> None:
    async with httpx.AsyncClient(base_url=gateway) as http:
        made = await http.post("/v1/threads", json={"id": "th-1", "metadata": {"k": "v"}})
        assert made.status_code == 201, made.text
        body = made.json()
        assert made.headers["location"] == "/v1/threads/th-1"
        assert body["id"] == "th-1" and body["metadata"] == {"k": "v"}
        assert body["links"] == {"self": "/v1/threads/th-1", "runs": "/v1/runs?thread_id=th-1"}
        anonymous = await http.post("/v1/threads")  # no body at all: an id is made up
        assert anonymous.status_code == 201 and anonymous.json()["id"].startswith("thread_")

        got = await http.get("/v1/threads/th-1")
        assert got.status_code == 200 and got.json() == body
        listed = (await http.get("/v1/threads", params={"limit": 1000})).json()["threads"]
        assert {"th-1", anonymous.json()["id"]} <= {t["id"] for t in listed}

        taken = await http.post("/v1/threads", json={"id": "th-1"})
        assert taken.status_code == 409 and "already recorded" in taken.json()["detail"]
        bad = await http.post("/v1/threads", json={"id": "a/b"})
        assert bad.status_code == 422 and "id must be" in bad.json()["detail"]
        unknown_field = await http.post("/v1/threads", json={"cwd": "/x"})
        assert unknown_field.status_code == 422
        assert (await http.get("/v1/threads", params={"limit": 0})).status_code == 400

        assert (await http.delete("/v1/threads/th-1")).status_code == 204
        missing = await http.get("/v1/threads/th-1")
        assert missing.status_code == 404 and "th-1" in missing.json()["detail"]
        assert (await http.delete("/v1/threads/th-1")).status_code == 404


async def test_a_browser_page_from_elsewhere_cannot_forget_a_thread(gateway: str) -> None:
    async with httpx.AsyncClient(base_url=gateway) as http:
        await http.post("/v1/threads", json={"id": "th-origin"})
        refused = await http.delete(
            "/v1/threads/th-origin", headers={"origin": "https://evil.example"}
        )
        assert refused.status_code == 403
        assert (await http.get("/v1/threads/th-origin")).status_code == 200


async def test_remote_service_records_threads_in_the_gateway(gateway: str) -> None:
    async with RemoteService(gateway) as service:
        made = await service.create_thread("th-remote", metadata={"acp": {"cwd": "/r"}})
        assert made.id == "th-remote" and made.metadata == {"acp": {"cwd": "/r"}}
        assert await service.get_thread("th-remote") == made
        assert made in await service.list_threads(limit=1000)
        with pytest.raises(ThreadExists):
            await service.create_thread("th-remote")
        # Ids no thread can have are one path segment all the same: nothing else is asked.
        for odd in ("", "a/b", "../runs", "x?y#z", "é", "th-remote/"):
            assert await service.get_thread(odd) is None
            assert await service.forget_thread(odd) is False
        assert await service.forget_thread("th-remote") is True
        assert await service.get_thread("th-remote") is None
        assert await service.forget_thread("th-remote") is False
        made_up = await service.create_thread()
        assert made_up.id.startswith("thread_")


async def test_dot_ids_stay_one_path_segment(gateway: str) -> None:
    # "." and ".." are ids like any other, which a URL path would resolve away.
    async with httpx.AsyncClient(base_url=gateway) as http:
        for dots in (".", ".."):
            assert (await http.post("/v1/threads", json={"id": dots})).status_code == 201
    async with RemoteService(gateway) as service:
        for dots in (".", ".."):
            found = await service.get_thread(dots)
            assert found is not None and found.id == dots
            assert await service.forget_thread(dots) is True
            assert await service.get_thread(dots) is None
