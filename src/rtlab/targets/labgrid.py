"""Boards in a labgrid lab: `labgrid:PLACE[,coordinator=HOST:PORT]`.

The place is acquired through labgrid's client library (the gRPC coordinator of labgrid 25.0
and later, at coordinator= or LG_COORDINATOR as labgrid-client reads it, else its default
port on this machine); its NetworkService resource gives the board's address, user and port,
and the measurement goes over the SSH target (the user's keys and known_hosts, as for
ssh://). The place is released when the run ends, however it ends; a place that someone else
holds is refused, never taken over.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from typing import Any

from rtlab.boundary.shapes import TargetJSON
from rtlab.errors import UsageError
from rtlab.targets.ssh import SshTarget

CONNECT_S = 20.0  # to reach the coordinator and learn its places


def parse(spec: str) -> tuple[str, str]:
    """(place, coordinator address) of `PLACE[,coordinator=HOST:PORT]`."""
    place, *options = spec.split(",")
    coordinator = os.environ.get("LG_COORDINATOR", "127.0.0.1:20408")
    for option in options:
        key, _, value = option.partition("=")
        if key != "coordinator" or not value:
            raise UsageError(f"labgrid target option {option!r}: the one option is coordinator=HOST:PORT")
        coordinator = value
    if not place:
        raise UsageError("labgrid target without a place: write labgrid:PLACE")
    return place, coordinator


class _Place:
    """One place held through a coordinator session; its client prints go to stderr."""

    def __init__(self, place: str, coordinator: str):
        try:
            from labgrid.remote.client import ClientSession, Error, ensure_event_loop
            from labgrid.util.proxy import proxymanager
        except ImportError:
            raise UsageError("the labgrid target needs labgrid: pip install 'rtlab[labgrid]'") from None
        self.name, self.coordinator, self._errors = place, coordinator, Error
        self.loop = ensure_event_loop()
        options = argparse.Namespace(place=place, allow_unmatched=False, kick=False)
        address = proxymanager.get_grpc_address(coordinator, default_port=20408)
        self.session = ClientSession(address, self.loop, args=options)
        self.held = False
        logging.disable(logging.ERROR)  # the client logs its connection errors: said below in one line
        try:
            with contextlib.redirect_stdout(sys.stderr):
                self.loop.run_until_complete(asyncio.wait_for(self.session.start(), CONNECT_S))
        except (TimeoutError, Error) as e:
            self._stop()
            raise UsageError(
                f"no labgrid coordinator answered at {coordinator} ({e or 'timed out'}): "
                "give coordinator=HOST:PORT or set LG_COORDINATOR"
            ) from None
        finally:
            logging.disable(logging.NOTSET)

    def acquire(self) -> None:
        self._do(self.session.acquire())
        self.held = True

    def network_service(self) -> dict[str, Any]:
        """The place's NetworkService arguments: address, username, port, password."""
        place = self.session.get_acquired_place(self.name)
        services = [
            resource.args for (_, cls), resource in self.session.get_target_resources(place).items()
            if cls == "NetworkService"
        ]  # fmt: skip
        if len(services) != 1:
            raise UsageError(
                f"labgrid place {self.name} has {len(services)} NetworkService resources: "
                "rtlab measures over SSH, so the place needs exactly one (add-match one to it)"
            )
        return dict(services[0])

    def release(self) -> None:
        try:
            if self.held:
                self._do(self.session.release())
                self.held = False
        finally:
            self._stop()

    def _stop(self) -> None:
        with contextlib.suppress(Exception):  # the coordinator may be gone: nothing is held then
            self.loop.run_until_complete(self.session.stop())
            self.loop.run_until_complete(self.session.close())

    def _do(self, step: Any) -> Any:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return self.loop.run_until_complete(step)
        except self._errors as e:
            raise UsageError(f"labgrid place {self.name}: {e}") from None


class LabgridTarget(SshTarget):
    def __init__(self, spec: str, accept_new_host_key: bool = False):
        place_name, coordinator = parse(spec)
        self.place = _Place(place_name, coordinator)
        try:
            self.place.acquire()
            service = self.place.network_service()
            user = service.get("username") or "root"
            host = str(service["address"])
            host = f"[{host}]" if ":" in host else host
            super().__init__(
                f"ssh://{user}@{host}:{int(service.get('port') or 22)}",
                accept_new_host_key,
                password=service.get("password") or None,
            )
        except BaseException:
            self.place.release()
            raise
        self.name = f"labgrid:{spec}"  # as given: `rtlab collect` finds the place again by it

    def describe(self) -> TargetJSON:
        data = super().describe()
        data.update({"kind": "labgrid", "place": self.place.name, "coordinator": self.place.coordinator})
        return data

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.place.release()
