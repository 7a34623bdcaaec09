"""The Redis journal's blob store (gateway.journal.blobs), under the journal's key prefix.

Every key of the store shares one hash tag (``<prefix>:{blobs}:…``, one Cluster slot), so
each script below touches one slot: a blob's bytes (``…:data:<ref>``), the runs that refer to
it (``…:referrers:<ref>``), each run's references (the ``…:refs`` hash) and the bytes stored
(``…:bytes``). Retention is the runs': the journal's ``delete`` (a run pruned, or one whose own
keys expired and which ``prune`` found in the index) drops the run's references, and each
blob nobody refers to then goes in the same script.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .blobs import DurableRelease, StoreFull
from .redis_link import RedisLink, reaching, reading

# KEYS: bytes stored, the runs' references.  ARGV: the bound, the run, the keys' base, then
# for each blob its ref, "1" and its bytes, or "0" and "" when it was found stored just before
# (its bytes are not sent again). {1, stored, adding} once kept; {0, stored, adding} past the
# bound and {2, 0, 0} for a blob not sent that is gone since, with nothing written either way.
_KEEP = """
local base, run = ARGV[3], ARGV[2]
local adding = 0
for i = 4, #ARGV, 3 do
  if redis.call('EXISTS', base .. ':data:' .. ARGV[i]) == 0 then
    if ARGV[i + 1] == '0' then return {2, 0, 0} end
    adding = adding + #ARGV[i + 2]
  end
end
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if adding > 0 and stored + adding > tonumber(ARGV[1]) then return {0, stored, adding} end
local refs = {}
local had = redis.call('HGET', KEYS[2], run)
if had then refs[1] = had end
for i = 4, #ARGV, 3 do
  if ARGV[i + 1] == '1' then redis.call('SET', base .. ':data:' .. ARGV[i], ARGV[i + 2], 'NX') end
  redis.call('SADD', base .. ':referrers:' .. ARGV[i], run)
  refs[#refs + 1] = ARGV[i]
end
redis.call('INCRBY', KEYS[1], adding)
redis.call('HSET', KEYS[2], run, table.concat(refs, ' '))
return {1, stored, adding}
"""

# KEYS: bytes stored, the runs' references.  ARGV: the keys' base, then run ids.
_DROP = """
local base = ARGV[1]
for i = 2, #ARGV do
  local refs = redis.call('HGET', KEYS[2], ARGV[i])
  if refs then
    for ref in string.gmatch(refs, '%S+') do
      local referrers = base .. ':referrers:' .. ref
      redis.call('SREM', referrers, ARGV[i])
      if redis.call('SCARD', referrers) == 0 then
        local data = base .. ':data:' .. ref
        redis.call('DECRBY', KEYS[1], redis.call('STRLEN', data))
        redis.call('DEL', data)
      end
    end
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return 1
"""


class RedisBlobs(DurableRelease):
    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.base = link.key("{blobs}")
        self._keys = [f"{self.base}:bytes", f"{self.base}:refs"]

    @reaching
    async def keep(self, run_id: str, blobs: Mapping[str, bytes], limit: int) -> None:
        client = self.link.client()
        pipe = client.pipeline(transaction=False)
        for ref in blobs:
            pipe.exists(f"{self.base}:data:{ref}")
        there = await pipe.execute()
        # A thread's next run refers to what its first one stored: only new bytes travel,
        # unless one of the others was dropped between the look and the script (then all).
        for send_all in (False, True):
            args: list[Any] = [limit, run_id, self.base]
            for (ref, raw), found in zip(blobs.items(), there, strict=True):
                sent = send_all or not found
                args += [ref, "1" if sent else "0", raw if sent else b""]
            kept, stored, adding = await client.eval(_KEEP, 2, *self._keys, *args)
            if kept == 1:
                return
            if kept == 0:
                raise StoreFull(int(stored), int(adding), limit)
        raise RuntimeError("the blob store refused blobs it was sent whole")

    @reaching
    async def forget(self, run_id: str) -> None:
        await self.link.client().eval(_DROP, 2, *self._keys, self.base, run_id)

    def drop(self, pipe: Any, run_ids: list[str]) -> None:
        """Queue, in the journal's delete, the drop of these runs' references."""
        pipe.eval(_DROP, 2, *self._keys, self.base, *run_ids)

    @reading
    async def referrers(self, cursor: str, limit: int) -> tuple[list[str], str]:
        # HSCAN's cursor: a page is about ``limit`` entries of the hash, whatever its size.
        at, page = await self.link.client().hscan(self._keys[1], int(cursor or 0), count=limit)
        return [run_id.decode() for run_id in page], str(at) if int(at) else ""

    @reading
    async def load(self, refs: Collection[str]) -> dict[str, bytes]:
        wanted = list(refs)
        raws = await self.link.client().mget([f"{self.base}:data:{ref}" for ref in wanted])
        return {ref: bytes(raw) for ref, raw in zip(wanted, raws, strict=True) if raw is not None}

    @reading
    async def usage(self) -> tuple[int, int]:
        client = self.link.client()
        count = 0
        async for _ in client.scan_iter(match=f"{self.base}:data:*", count=500):
            count += 1
        return count, int(await client.get(f"{self.base}:bytes") or 0)
