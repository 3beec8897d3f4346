"""Where the scheduler conf comes from: built in, a file (re-read when it changes), or a ConfigMap
(watched through the API). A bad new conf is rejected with a log line and an Event; the last good
one keeps running."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from caldera.cache.client import ApiClient
from caldera.cache.informer import ConfigMap
from caldera.cache.watch import Reflector
from caldera.config.conf import DEFAULT_CONF, ConfError, parse_conf
from caldera.framework.plugin import Registry
from caldera.framework.tiers import SchedulerConf
from caldera.metrics import scheduler as m

log = logging.getLogger("caldera.conf")

#: Volcano's key in its scheduler ConfigMap.
DEFAULT_KEY = "volcano-scheduler.conf"

EventSink = Callable[[dict[str, str], str, str, str], None]


def parse_source(spec: str | None) -> tuple[str, str, str, str]:
    """``None`` → builtin; ``PATH`` → file; ``configmap:NS/NAME[:KEY]`` → ConfigMap.
    Returns (kind, path-or-namespace, name, key)."""
    if not spec:
        return ("builtin", "", "", "")
    if spec.startswith("configmap:"):
        rest = spec[len("configmap:") :]
        ref, _, key = rest.partition(":")
        ns, _, name = ref.partition("/")
        if not ns or not name:
            raise ConfError(f"--scheduler-conf {spec!r}: expected configmap:NAMESPACE/NAME[:KEY]")
        return ("configmap", ns, name, key)
    return ("file", spec, "", "")


class ConfSource:
    def __init__(
        self,
        spec: str | None,
        registry: Registry,
        *,
        client: ApiClient | None = None,
        poll_interval: float = 1.0,
        event_sink: EventSink | None = None,
        on_reload: Callable[[SchedulerConf], None] | None = None,
    ) -> None:
        self.kind, self.location, self.name, self.key = parse_source(spec)
        self.registry = registry
        self.client = client
        self.poll_interval = poll_interval
        self.event_sink = event_sink
        self.on_reload = on_reload
        self._conf: SchedulerConf | None = None
        self._digest = ""
        self.reflector: Reflector[ConfigMap] | None = None
        self.last_error = ""
        self.reloads = 0
        #: for /debug/scheduler: the running conf's text, when it was taken, the last reload's outcome
        self.text = ""
        self.loaded_at = 0.0
        self.last_reload: dict[str, Any] | None = None
        self.rejected = 0

    @property
    def conf(self) -> SchedulerConf:
        assert self._conf is not None, "no conf loaded yet"
        return self._conf

    def get(self) -> SchedulerConf:
        return self.conf

    @property
    def loaded(self) -> bool:
        return self._conf is not None

    # -- loading -----------------------------------------------------------------------------------
    def load_initial(self) -> SchedulerConf:
        """The builtin or file conf at start; :class:`ConfError` if unusable (the binary fails fast).
        A ConfigMap conf arrives with its watch (see :meth:`reflector_for`)."""
        if self.kind == "builtin":
            self._conf = parse_conf(DEFAULT_CONF, self.registry)
            self.text, self.loaded_at = DEFAULT_CONF, time.time()
        elif self.kind == "file":
            try:
                text = Path(self.location).read_text()
            except OSError as exc:
                raise ConfError(f"cannot read the scheduler conf {self.location}: {exc}") from None
            self._conf = parse_conf(text, self.registry)
            self._digest = hashlib.sha256(text.encode()).hexdigest()
            self.text, self.loaded_at = text, time.time()
        return self._conf  # type: ignore[return-value]

    def offer(self, text: str, origin: str) -> bool:
        """A new conf text: take it if it parses, else keep the last good one."""
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self._digest:
            return True
        self._digest = digest
        try:
            conf = parse_conf(text, self.registry)
        except ConfError as exc:
            self.rejected += 1
            self.last_error = str(exc)
            self.last_reload = {"result": "rejected", "message": str(exc), "at": time.time()}
            m.CONF_RELOADS.labels("rejected").inc()
            keeping = "the last good conf keeps running" if self._conf is not None else "no conf to run yet"
            log.error("rejected the new scheduler conf from %s: %s; %s", origin, exc, keeping)
            self._emit(
                "Warning", "ConfRejected", f"rejected the new scheduler conf from {origin}: {exc}; {keeping}"
            )
            return False
        first = self._conf is None
        self._conf = conf
        self.last_error = ""
        self.text, self.loaded_at = text, time.time()
        if not first:
            self.last_reload = {"result": "ok", "message": "", "at": self.loaded_at}
            self.reloads += 1
            m.CONF_RELOADS.labels("ok").inc()
            log.info("reloaded the scheduler conf from %s: actions %s", origin, ", ".join(conf.actions))
            self._emit("Normal", "ConfReloaded", f"reloaded the scheduler conf from {origin}")
        if self.on_reload is not None:
            self.on_reload(conf)
        return True

    def _emit(self, etype: str, reason: str, message: str) -> None:
        if self.event_sink is None:
            return
        if self.kind == "configmap":
            ref = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": self.location, "name": self.name}
        else:
            ref = {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": os.environ.get("POD_NAMESPACE", "default"),
                "name": os.environ.get("POD_NAME", "caldera-scheduler"),
            }
        try:
            self.event_sink(ref, etype, reason, message)
        except Exception:
            log.exception("could not record the conf event")

    # -- watching ----------------------------------------------------------------------------------
    async def watch_file(self, stop: asyncio.Event) -> None:
        """Poll the file (this also sees a ConfigMap volume's symlink swap, which inotify on the file misses)."""
        last_stat: tuple[float, int, int] | None = None
        while not stop.is_set():
            try:
                async with asyncio.timeout(self.poll_interval):
                    await stop.wait()
                return
            except TimeoutError:
                pass
            try:
                st = os.stat(self.location)
                stat = (st.st_mtime, st.st_size, st.st_ino)
                if stat == last_stat:
                    continue
                last_stat = stat
                text = await asyncio.to_thread(Path(self.location).read_text)
            except OSError as exc:
                log.warning(
                    "cannot read the scheduler conf %s: %s; keeping the current one", self.location, exc
                )
                continue
            self.offer(text, self.location)

    def reflector_for(self, client: ApiClient) -> Reflector[ConfigMap]:
        source = self

        class _Handler:
            def replace(self, objects: list[ConfigMap]) -> None:
                for cm in objects:
                    self.upsert(cm)

            def upsert(self, cm: ConfigMap) -> None:
                if cm.metadata.name != source.name:
                    return
                data = cm.data or {}
                key = source.key or (
                    DEFAULT_KEY if DEFAULT_KEY in data or len(data) != 1 else next(iter(data))
                )
                text = data.get(key)
                origin = f"ConfigMap {source.location}/{source.name} key {key}"
                if text is None:
                    source.offer("", origin)
                    return
                source.offer(text, origin)

            def delete(self, cm: ConfigMap) -> None:
                log.warning(
                    "the conf ConfigMap %s/%s was deleted; the current conf keeps running",
                    source.location,
                    source.name,
                )

        def _decode(kind: Any, raw: bytes) -> ConfigMap:
            import msgspec

            return msgspec.json.decode(raw, type=ConfigMap)

        self.reflector = Reflector(
            client,
            f"/api/v1/namespaces/{self.location}/configmaps",
            ConfigMap,
            _Handler(),
            name="conf-configmap",
            params={"fieldSelector": f"metadata.name={self.name}"},
            decode_fn=_decode,
        )
        return self.reflector
