"""A plain FastAPI app under uvicorn, in a process of its own on a free loopback port.

The Serve lesson's baseline: the same model and request schema as its Serve deployment, with no
Ray in the path. A function that builds the app (defined in a notebook cell) travels to the
process pickled with ``cloudpickle``, as Serve ships a deployment's code to its replicas (a built
FastAPI app does not unpickle: starlette's ``State`` recurses). The process binds 127.0.0.1 only,
runs torch on one thread (as the lesson's replicas do), and is stopped by PID, also when the
cell that started it fails (use it as a context manager).

Used in: 09, lab_serve.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.checks import wait_until
from labkit.runtime import procs
from labkit.runtime.net import LOCALHOST, free_port, listening


class PlainServer:
    """A uvicorn process serving ``make_app()`` on ``http://127.0.0.1:<port>``."""

    def __init__(
        self,
        make_app: Callable[[], Any],
        *,
        port: int | None = None,
        start_timeout_s: float = 60.0,
    ):
        import cloudpickle

        self.port = port or free_port()
        self.url = f"http://{LOCALHOST}:{self.port}"
        fd, name = tempfile.mkstemp(prefix="labkit-app-", suffix=".pkl")
        with os.fdopen(fd, "wb") as f:
            f.write(cloudpickle.dumps(make_app))
        self._pickle = Path(name)
        env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "labkit.plainhttp", str(self._pickle), str(self.port)],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        self.owner = f"plainhttp:{self.process.pid}"
        procs.remember({"uvicorn": [self.process.pid]}, self.owner)
        up = wait_until(
            lambda: self.process.poll() is not None or listening(self.port), start_timeout_s
        )
        if not up or self.process.poll() is not None:
            self.stop()
            raise RuntimeError(f"the plain FastAPI server did not start on port {self.port}")

    def stop(self) -> None:
        """Stop the server process (SIGTERM, then SIGKILL) and remove its files."""
        procs.stop_child(self.process)
        procs.forget(self.owner)
        self._pickle.unlink(missing_ok=True)

    def __enter__(self) -> PlainServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _main(pickle_path: str, port: str) -> None:
    import cloudpickle
    import uvicorn

    make_app = cloudpickle.loads(Path(pickle_path).read_bytes())
    app = make_app()
    uvicorn.run(app, host=LOCALHOST, port=int(port), log_level="warning", access_log=False)


if __name__ == "__main__":
    _main(*sys.argv[1:3])
