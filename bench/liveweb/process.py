"""Start and stop the test web in its own process, from benchmarks and tests.

    with ServerProcess(ScenarioParams.small(seed=3, minutes=2), folder) as web:
        web.base_url(0)            # http://127.0.0.2:<port>
        ...                        # crawl it
    report = evaluate_log(web.log)  # after stop: the log is complete
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.liveweb.params import ScenarioParams
from bench.liveweb.server import header_path

__all__ = ["REPO", "ServerProcess", "read_header", "read_log"]

REPO = Path(__file__).resolve().parents[2]


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The log's entries; a torn last line (the writer still busy) is left out."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                entries.append(json.loads(line))
    return entries


def read_header(log: str | Path) -> dict[str, Any]:
    return json.loads(header_path(log).read_text())


class ServerProcess:
    """``python -m bench.liveweb.server`` for ``params``, its files in ``folder`` (the log is
    ``<name>.jsonl``, its header ``<name>.header.json``)."""

    def __init__(self, params: ScenarioParams, folder: str | Path, port: int = 0,
                 name: str = "requests") -> None:
        self.params, self.folder, self.requested_port = params, Path(folder), port
        self.log = self.folder / f"{name}.jsonl"
        self.header = header_path(self.log)
        self._params_file = self.folder / f"{name}.params.json"
        self._stderr = self.folder / f"{name}.stderr"
        self.process: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    @property
    def hosts(self) -> list[str]:
        return list(self.info["hosts"])

    @property
    def port(self) -> int:
        return int(self.info["port"])

    @property
    def origin(self) -> float:
        """Epoch seconds of the scenario's t = 0."""
        return float(self.info["origin"])

    def now(self) -> float:
        """Scenario time (seconds since the origin) by this process's monotonic clock, which on
        Linux is the server's too."""
        return time.monotonic() - float(self.info["origin_mono"])

    def base_url(self, shop: int = 0) -> str:
        return f"http://{self.hosts[shop]}:{self.port}"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """Start the server and wait (at most ``timeout`` seconds) for its READY line."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._params_file.write_text(json.dumps(self.params.to_dict()))
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self._stderr, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bench.liveweb.server", "--params", str(self._params_file),
                 "--log", str(self.log), "--port", str(self.requested_port)],
                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                line = self.process.stdout.readline().decode()
                if line.startswith("READY "):
                    self.info = json.loads(line[len("READY "):])
                    return self
                if not line:
                    break  # the process died
        self.stop()
        raise RuntimeError(f"liveweb server did not start: {self._stderr.read_text()[-2000:]}")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the log is complete afterwards."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def entries(self) -> list[dict[str, Any]]:
        return read_log(self.log)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
