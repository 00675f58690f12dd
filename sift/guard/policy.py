"""The guard's settings as one frozen value: which ports, and which non-public networks anyway."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_network

from sift.config import GuardConfig
from sift.guard.addresses import IPAddress, embedded_ipv4, parse_ip, why_not_public

Network = IPv4Network | IPv6Network

# What an operator changes to let a refused destination through: every refusal names its key.
PORTS_KEY = "to allow it, add the port to [guard] allowed_ports"
NETWORKS_KEY = "to allow it, add its network to [guard] allow_networks"


def config_key_for(reason: str) -> str:
    """The config-key note for a guard refusal's reason."""
    return PORTS_KEY if reason.startswith("port ") else NETWORKS_KEY


@dataclass(frozen=True)
class Policy:
    """Ports a URL may name, and non-public networks that are allowed anyway.

    `allow_networks` exists so tests (and odd deployments) can reach their own loopback sites;
    it never widens what an IPv4-in-IPv6 form may reach: its embedded IPv4 must be allowed too.
    """

    allowed_ports: tuple[int, ...] = (80, 443)
    allow_networks: tuple[Network, ...] = ()

    @classmethod
    def from_config(cls, cfg: GuardConfig) -> Policy:
        return cls(
            allowed_ports=tuple(cfg.allowed_ports),
            allow_networks=tuple(ip_network(n, strict=False) for n in cfg.allow_networks),
        )

    @classmethod
    def of(cls, allowed_ports=(80, 443), allow_networks=()) -> Policy:
        """Build from plain values (CIDR strings accepted), mostly for tests and scripts."""
        return cls.from_config(
            GuardConfig(allowed_ports=tuple(allowed_ports), allow_networks=tuple(allow_networks))
        )

    def allows_port(self, port: int | None) -> bool:
        return port is not None and port in self.allowed_ports

    def _listed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.allow_networks)

    def refusal(self, ip: str | IPAddress) -> str | None:
        """None when Sift may connect to `ip`; otherwise why not (see `why_not_public`)."""
        reason = why_not_public(ip)
        if reason is None:
            return None
        try:
            ip = parse_ip(ip)
        except ValueError:
            return reason
        carried = embedded_ipv4(ip)
        if carried is not None:
            form, v4 = carried
            if self.refusal(v4) is not None:
                return reason
            # A mapped address is the IPv4 host itself; other forms go through a translator
            # or relay, so the IPv6 form must be listed as well.
            return None if form == "IPv4-mapped" or self._listed(ip) else reason
        return None if self._listed(ip) else reason

    def allows_address(self, ip: str | IPAddress) -> bool:
        """Public, or inside `allow_networks` (IPv4-in-IPv6: the embedded IPv4 allowed too)."""
        return self.refusal(ip) is None
