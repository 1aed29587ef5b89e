"""A worker of `lineage serve --workers N` (lineage/serve/workers.py): uvicorn serving
the connections the supervisor hands it, instead of accepting its own.

    python -m lineage.serve.worker FD      # FD: its end of the supervisor's socket pair

The application is configured through the environment, as `lineage serve` set it
(lineage/serve/app.py `app_from_environment`).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

import uvicorn

# Descriptors taken per message: the supervisor sends one connection per message.
_MESSAGE_FDS = 1


class HandedConnectionsServer(uvicorn.Server):
    """uvicorn's server, without a listening socket, fed accepted connections."""

    def __init__(self, config: uvicorn.Config, channel: socket.socket) -> None:
        super().__init__(config)
        self.channel = channel
        self._handing: set[asyncio.Task[Any]] = set()  # the loop keeps weak references

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # no socket of its own to listen on
        if not self.should_exit:
            from lineage.serve.workers import READY

            self.channel.send(READY)  # the supervisor deals connections after this
            self.channel.setblocking(False)
            asyncio.get_running_loop().add_reader(self.channel.fileno(), self._take)

    def _take(self) -> None:
        """Serve every connection waiting in the channel; stop when it closes."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.channel, 1, _MESSAGE_FDS)
            except BlockingIOError:
                return
            if not data:  # the supervisor is gone: finish what was begun, then stop
                loop.remove_reader(self.channel.fileno())
                self.should_exit = True
                return
            for fd in fds:
                connection = socket.socket(fileno=fd)
                task = loop.create_task(loop.connect_accepted_socket(self._protocol,
                                                                     connection))
                self._handing.add(task)
                task.add_done_callback(self._handing.discard)

    def _protocol(self) -> Any:
        """The HTTP protocol uvicorn would make for a connection it accepted itself."""
        return self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state,
            app_state=self.lifespan.state)


def main(argv: list[str]) -> None:
    from lineage.serve.tcp import UVICORN_SETTINGS
    from lineage.store.no_pandas import keep_pandas_out

    keep_pandas_out()  # no answer needs pandas: pyarrow would import it per process

    channel = socket.socket(fileno=int(argv[0]))
    config = uvicorn.Config("lineage.serve.app:app_from_environment", factory=True,
                            **UVICORN_SETTINGS)
    HandedConnectionsServer(config, channel).run()


if __name__ == "__main__":
    main(sys.argv[1:])
