"""Bearer credentials that rotate: one :class:`TokenSource` per API client, consulted per request.

A projected ServiceAccount token is rewritten by the kubelet well before it expires, and client-go
re-reads a token file every minute (client-go ``transport/token_source.go``,
``NewCachedFileTokenSource``: ``period: time.Minute``); an exec credential plugin's token is good
until its ``expirationTimestamp`` (client-go ``plugin/pkg/client/auth/exec/exec.go``, which runs the
plugin again once the cached credential has expired). Here ``current()`` answers the token to send
now, re-reading the file once a period has passed and starting the plugin again before the expiry;
after a 401 the client calls ``renew()``, which reads or runs again at once, and retries the request
once if the token changed. Every 401 is counted in ``caldera_api_auth_failures_total``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from prometheus_client import Counter

log = logging.getLogger("caldera.auth")

AUTH_FAILURES = Counter(
    "caldera_api_auth_failures",
    "Requests the API server answered 401 Unauthorized (each is retried once with a token read again).",
)

#: how often a token file is read again (client-go: every minute)
FILE_PERIOD = 60.0


class CredentialError(Exception):
    """An exec credential plugin that could not be run or whose output is not a usable token."""


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig ``user.exec`` entry (client-go ``clientcmd/api/v1`` ExecConfig) whose plugin
    prints an ExecCredential with a bearer token."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    timeout: float = 30.0

    def _environ(self) -> dict[str, str]:
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        return {**os.environ, **dict(self.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}

    def parse(self, out: bytes) -> tuple[str, float | None]:
        """(token, expiry as a Unix time or None) from the plugin's standard output."""
        try:
            doc = json.loads(out)
        except ValueError as exc:
            raise CredentialError(f"exec plugin {self.command}: output is not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise CredentialError(f"exec plugin {self.command}: output is not an ExecCredential")
        if doc.get("apiVersion") != self.api_version:
            raise CredentialError(
                f"exec plugin {self.command}: answered apiVersion {doc.get('apiVersion')!r}, "
                f"the kubeconfig asks for {self.api_version!r}"
            )
        status = doc.get("status")
        token = status.get("token") if isinstance(status, dict) else None
        if not isinstance(token, str) or not token:
            raise CredentialError(f"exec plugin {self.command}: the ExecCredential has no status.token")
        stamp = status.get("expirationTimestamp") if isinstance(status, dict) else None
        if not stamp:
            return token, None
        try:
            expiry = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise CredentialError(
                f"exec plugin {self.command}: unreadable expirationTimestamp {stamp!r}"
            ) from None
        return token, expiry

    def run(self) -> tuple[str, float | None]:
        """Run the plugin now (blocking: at start-up, before the event loop serves anything)."""
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=self._environ(),
                cwd=self.cwd,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CredentialError(f"exec plugin {self.command}: {exc}") from None
        return self._result(done.returncode, done.stdout, done.stderr)

    async def run_async(self) -> tuple[str, float | None]:
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                env=self._environ(),
                cwd=self.cwd,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise CredentialError(f"exec plugin {self.command}: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise CredentialError(f"exec plugin {self.command}: no answer within {self.timeout:g}s") from None
        return self._result(proc.returncode or 0, out, err)

    def _result(self, code: int, out: bytes, err: bytes) -> tuple[str, float | None]:
        if code != 0:
            said = " ".join(err.decode("utf-8", "replace").split())[:300]
            raise CredentialError(f"exec plugin {self.command} exited {code}: {said}")
        return self.parse(out)


@dataclass
class TokenSource:
    """The bearer token to send now: fixed, read from ``path``, or printed by ``plugin``."""

    token: str = ""
    path: Path | None = None
    plugin: ExecPlugin | None = None
    period: float = FILE_PERIOD
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    #: the monotonic time at which the token is read (or the plugin run) again
    _due: float = field(default=float("inf"), init=False)
    _running: asyncio.Task[bool] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.path is not None:
            self.token = self._read_file()
            self._due = self.clock() + self.period
        elif self.plugin is not None and not self.token:
            self._take(*self.plugin.run())

    def current(self) -> str:
        """The token for the next request; re-reads a token file once per period and starts the exec
        plugin again before its token expires (meanwhile the one in hand is sent)."""
        if self.clock() < self._due:
            return self.token
        if self.path is not None:
            self._due = self.clock() + self.period
            self._reread()
        elif self.plugin is not None and self._running is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._take(*self.plugin.run())
            else:
                self._running = loop.create_task(self._run_plugin(), name="exec-credential")
        return self.token

    async def renew(self, rejected: str) -> bool:
        """The API server answered 401 to ``rejected``: read or run again now. True when the token
        now in hand differs from ``rejected`` (the request is worth one more try)."""
        if self.token != rejected:
            return True  # renewed meanwhile (another request's 401, or the period)
        if self.path is not None:
            self._due = self.clock() + self.period
            self._reread()
        elif self.plugin is not None:
            if self._running is None:
                self._running = asyncio.get_running_loop().create_task(
                    self._run_plugin(), name="exec-credential"
                )
            await asyncio.shield(self._running)
        return bool(self.token) and self.token != rejected

    # -- internals -----------------------------------------------------------------------------------
    def _read_file(self) -> str:
        assert self.path is not None
        return self.path.read_text().strip()

    def _reread(self) -> None:
        try:
            token = self._read_file()
        except OSError as exc:
            log.warning("cannot read the token file %s (%s); keeping the token in hand", self.path, exc)
            return
        if token and token != self.token:
            log.info("the token file %s holds a new token; using it from now on", self.path)
            self.token = token

    def _take(self, token: str, expiry: float | None) -> None:
        self.token = token
        if expiry is None:
            self._due = float("inf")  # client-go runs such a plugin again only after a 401
            return
        left = expiry - self.wall()
        # Again before it expires: at four fifths of its life, and at least 10 s before the end.
        self._due = self.clock() + max(0.0, min(left * 0.8, left - 10.0))

    async def _run_plugin(self) -> bool:
        assert self.plugin is not None
        try:
            self._take(*await self.plugin.run_async())
            log.info("exec plugin %s gave a new token", self.plugin.command)
            return True
        except CredentialError as exc:
            # Try again in 10 s; the token in hand is sent meanwhile (a 401 asks again at once).
            log.warning("%s; keeping the token in hand", exc)
            self._due = self.clock() + 10.0
            return False
        finally:
            self._running = None
