"""The scheduler's ``--listen-address``: ``HOST:PORT``, read without importing the HTTP server (the
flag is checked before the scheduler's imports)."""

from __future__ import annotations


def parse_listen_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6; an empty host means 127.0.0.1) into (host, port);
    a ValueError names what is wrong with it."""
    host, sep, port = address.strip().rpartition(":")
    if not sep:
        raise ValueError(f"{address!r} is not HOST:PORT (e.g. 127.0.0.1:8080, or 0.0.0.0:8080 inside a pod)")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{address!r} has no valid port: {port!r} is not a number from 0 to 65535")
    host = host.strip("[]") or "127.0.0.1"
    if any(c.isspace() for c in host) or ("/" in host):
        raise ValueError(f"{address!r} has no valid host: {host!r}")
    return host, int(port)
