"""The controller loop (upstream internal/ingress/controller/nginx.go NGINXController, store/store.go,
internal/ingress/status/status.go): informers on Ingresses, IngressClasses, Services, EndpointSlices and
Secrets; any change marks the configuration dirty and the sync (at most one per --sync-period-min) renders it,
and reloads nginx only when the text changed. Every replica serves traffic; only the leader of the
`ingress-nginx-leader` Lease writes status.loadBalancer of the Ingresses of its class (upstream's status
sync), and clears it on shutdown (--update-status-on-shutdown)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingress_nginx import model
from ingress_nginx.nginx import Nginx, NginxError
from ingress_nginx.template import Settings, certificate_path, render
from machinery.api.core_v1 import Secret, Service
from machinery.api.discovery_v1 import EndpointSlice
from machinery.api.networking_v1 import Ingress, IngressClass
from machinery.client import ApiClient, ApiError, ClientError
from machinery.events import EventRecorder
from machinery.informer import SharedInformerFactory
from machinery.types import Obj

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    controller_class: str = "k8s.io/ingress-nginx"
    ingress_class: str = "nginx"
    watch_ingress_without_class: bool = False
    publish_status_address: str = ""
    update_status: bool = True
    update_status_on_shutdown: bool = True
    allow_snippet_annotations: bool = False
    sync_period_min: float = 0.1


class IngressController:
    def __init__(self, client: ApiClient, nginx: Nginx, settings: Settings, options: Options,
                 recorder: EventRecorder | None = None):
        self.client = client
        self.nginx = nginx
        self.settings = settings
        self.options = options
        self.recorder = recorder
        self.factory = SharedInformerFactory(client)
        self.ingresses = self.factory.informer_for(Ingress)
        self.classes = self.factory.informer_for(IngressClass)
        self.services = self.factory.informer_for(Service)
        self.slices = self.factory.informer_for(EndpointSlice)
        self.secrets = self.factory.informer_for(Secret, field_selector=f"type={model.SECRET_TYPE_TLS}")
        self.dirty = asyncio.Event()
        self.status_due = asyncio.Event()
        self.leading = False
        self.rendered: str | None = None
        self.synced = False
        self.reloading = False  # from a change seen until nginx runs it alone (the old workers gone)
        self.last_error = ""
        self._reported: set[tuple[tuple[str, str], str, str]] = set()
        self._announced: set[str] = set()  # uid:generation of Ingresses given a Sync event
        for informer in (self.classes, self.services, self.slices, self.secrets):
            informer.add_event_handler(on_add=self._changed, on_update=lambda _o, _n: self._changed(None),
                                       on_delete=self._changed)
        self.ingresses.add_event_handler(on_add=self._ingress_changed, on_update=lambda _o, n: self._ingress_changed(n),
                                         on_delete=self._changed)

    def _changed(self, _obj: Any) -> None:
        self.dirty.set()
        self.reloading = True

    def _ingress_changed(self, ingress: Ingress) -> None:
        self._changed(ingress)
        self.status_due.set()
        if self.recorder is None or not self._ours(ingress.to_dict()):
            return
        stamp = f"{ingress.metadata.uid}:{ingress.metadata.generation}"
        if stamp not in self._announced:  # upstream: Normal Sync "Scheduled for sync", once per change of spec
            self._announced.add(stamp)
            self.recorder.event(ingress, "Normal", "Sync", "Scheduled for sync")

    def _ours(self, ingress: Obj) -> bool:
        classes = {c.metadata.name or "": c.to_dict() for c in self.classes.list()}
        o = self.options
        return model.is_ours(ingress, classes, o.controller_class, o.ingress_class, o.watch_ingress_without_class)

    def our_ingresses(self) -> list[Ingress]:
        return [i for i in self.ingresses.list() if self._ours(i.to_dict())]

    def configuration(self) -> model.Configuration:
        return model.build([i.to_dict() for i in self.our_ingresses()],
                           [s.to_dict() for s in self.services.list()], [e.to_dict() for e in self.slices.list()],
                           [s.to_dict() for s in self.secrets.list()],
                           allow_snippets=self.options.allow_snippet_annotations)

    def _write_certificates(self, config: model.Configuration) -> None:
        for key, pem in config.certificates.items():
            path = Path(certificate_path(self.settings.run_dir, key))
            if not path.exists() or path.read_bytes() != pem:
                tmp = path.with_suffix(".tmp")
                tmp.touch(mode=0o600)
                tmp.write_bytes(pem)
                tmp.replace(path)

    def _report(self, config: model.Configuration) -> None:
        """Events for problems not reported yet (a missing or unusable TLS Secret)."""
        if self.recorder is None:
            return
        for problem in config.problems:
            key = (problem.ingress, problem.reason, problem.message)
            ingress = self.ingresses.get(problem.ingress[1], problem.ingress[0])
            if key in self._reported or ingress is None:
                continue
            self._reported.add(key)
            log.warning("%s/%s: %s", *problem.ingress, problem.message)
            self.recorder.event(ingress, "Warning", problem.reason, problem.message)

    async def sync(self) -> bool:
        """Render; if the text changed, test and reload. True when nginx runs the rendered text."""
        config = self.configuration()
        self._write_certificates(config)
        self._report(config)
        text = render(config, self.settings)
        if text == self.rendered:
            return True
        try:
            if self.nginx.running():
                await self.nginx.reload(text)
                log.info("backend reloaded (%d servers, %d upstreams)", len(config.servers), len(config.upstreams))
            else:
                await self.nginx.start(text)
                log.info("nginx started on :%d and :%d", self.settings.http_port, self.settings.https_port)
        except NginxError as e:
            self.last_error = str(e)
            log.error("Unexpected failure reloading the backend: %s (the running configuration is kept)", e)
            self._reload_failed(str(e))
            self.rendered = text  # do not test the same broken text again until something changes
            return False
        self.rendered = text
        self.last_error = ""
        return True

    def _reload_failed(self, message: str) -> None:
        if self.recorder is None:
            return
        for ingress in self.our_ingresses():
            annotations = ingress.metadata.annotations or {}
            if self.options.allow_snippet_annotations and model.CONFIGURATION_SNIPPET in annotations:
                self.recorder.event(ingress, "Warning", "RELOAD", f"Error reloading NGINX: {message}")

    async def run_sync(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await _first(stop.wait(), self.dirty.wait())
            if stop.is_set():
                return
            await asyncio.sleep(self.options.sync_period_min)  # gather a burst of changes into one reload
            self.dirty.clear()
            try:
                await self.sync()
            except (OSError, ClientError) as e:
                log.error("sync failed: %s", e)
                self.dirty.set()
                await asyncio.sleep(1.0)
            if not self.dirty.is_set():
                self.reloading = False

    # -- status ------------------------------------------------------------------------------------------

    def wanted_status(self) -> list[Obj]:
        address = self.options.publish_status_address
        if not address:
            return []
        return [{"ip": address}]

    async def update_status(self, entries: list[Obj]) -> None:
        """Write status.loadBalancer.ingress of each of our Ingresses that says otherwise (status.go)."""
        for ingress in self.our_ingresses():
            current = [e.to_dict() for e in
                       ((ingress.status.load_balancer.ingress or []) if ingress.status and
                        ingress.status.load_balancer else [])]
            if current == entries:
                continue
            body = ingress.to_dict()
            body["status"] = {"loadBalancer": {"ingress": entries} if entries else {}}
            try:
                await self.client.update_status(Ingress.from_dict(body))
                log.info("updating Ingress %s/%s status from %s to %s", ingress.metadata.namespace,
                         ingress.metadata.name, current, entries)
            except ApiError as e:
                if not (e.is_not_found or e.is_conflict):
                    log.warning("updating Ingress %s/%s status: %s", ingress.metadata.namespace,
                                ingress.metadata.name, e)
                self.status_due.set()

    async def run_status(self, stop: asyncio.Event) -> None:
        """While leading: keep every Ingress of ours pointing at this controller's address."""
        self.leading = True
        try:
            while not stop.is_set():
                self.status_due.clear()
                with contextlib.suppress(ClientError):
                    await self.update_status(self.wanted_status())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(stop.wait(), self.status_due.wait()), 60)
        finally:
            # on shutdown only: a replica that merely lost the Lease leaves the status to the new leader
            if self.options.update_status_on_shutdown and stop.is_set():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.update_status([]), 5)
            self.leading = False


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

