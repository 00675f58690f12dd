"""A resolver that judges every answer before aiohttp may connect to any of it.

aiohttp connects to exactly the addresses its resolver returns (no second lookup), so judging
the answer here is judging the destination: DNS rebinding would need a second answer that never
gets asked for. One non-allowed address refuses the whole answer, because happy eyeballs may
pick any of them.
"""

from __future__ import annotations

import socket

from aiohttp import ThreadedResolver
from aiohttp.abc import AbstractResolver, ResolveResult

from sift.guard.blocked import GuardBlocked
from sift.guard.policy import Policy


class GuardedResolver(AbstractResolver):
    """Resolves once with `inner` (default: aiohttp's ThreadedResolver) and judges the answer.

    Raises `GuardBlocked` when any returned address is not allowed by `policy`.
    """

    def __init__(self, policy: Policy, inner: AbstractResolver | None = None):
        self.policy = policy
        self._inner = inner

    @property
    def inner(self) -> AbstractResolver:
        if self._inner is None:
            self._inner = ThreadedResolver()
        return self._inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answer = await self.inner.resolve(host, port, family)
        if not answer:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} has no addresses")
        for entry in answer:
            reason = self.policy.refusal(entry["host"])
            if reason is not None:
                addr = entry["host"]
                raise GuardBlocked(f"{host} resolves to non-public address {addr} ({reason})")
        return list(answer)

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()
