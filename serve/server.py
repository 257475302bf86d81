"""Starting the tritonserver that the `nvidia-pytriton` wheel ships, on one machine.

The wheel carries a tritonserver binary with the Python backend only (pytriton/tritonserver/:
bin/, backends/python/, caches/, and one Python-backend stub per Python version under
python_backend_stubs/). PyTriton's own API offers no sequence batcher, so we run the binary on
our repository ourselves, the way PyTriton prepares it:

    * a backend directory holding backends/python/ (the backend library and its utils, linked)
      with the stub of the server venv's Python version as triton_python_backend_stub;
    * LD_LIBRARY_PATH: the wheel's own libraries (nvidia_pytriton.libs) and the directory of
      the server Python's libpython (the stub embeds it);
    * PATH: the server venv's bin first, so the stub runs the venv's Python, whose site-packages
      hold numpy < 2 and tickformer.

The server venv (.venv-serve, `make serve` / `make check` build it from requirements-serve.lock)
is separate from the project's because nvidia-pytriton pins numpy < 2.

`Server` starts the process, waits until the model is ready (gRPC health) and stops it with
SIGTERM (then SIGKILL after `stop_timeout_s`); tritonserver finishes in-flight requests and
unloads the model on SIGTERM. A stream still open (no END yet) counts as in flight for Triton: it
waits --exit-timeout-secs (5) for it, then drops it and exits 1. Not real-time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tickformer.errors import ConfigError, TickformerError

DEFAULT_ENV = ".venv-serve"
ENV_VAR = "TICKFORMER_SERVE_ENV"  # another server venv than ./.venv-serve


class ServerError(TickformerError):
    """The Triton server could not be found, prepared or started, or it stopped."""


def server_env(env: str | os.PathLike[str] | None = None) -> Path:
    """The server venv: `env`, $TICKFORMER_SERVE_ENV, or ./.venv-serve. Raises ServerError naming
    how to build it when it has no tritonserver."""
    path = Path(env or os.environ.get(ENV_VAR) or DEFAULT_ENV).absolute()
    if not (path / "bin" / "python").exists():
        raise ServerError(
            f"no server venv at {path}: run `make .venv-serve/.installed` (or `make serve`) to build it, "
            f"or pass --server-env DIR / set ${ENV_VAR}"
        )
    return path


def _env_python(env: Path, code: str) -> str:
    out = subprocess.run(
        [str(env / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        raise ServerError(
            f"{env}/bin/python failed: {out.stderr.strip().splitlines()[-1:]}; rebuild the server venv"
        )
    return out.stdout.strip()


def triton_dist(env: Path) -> tuple[Path, str, Path]:
    """(pytriton's tritonserver directory, the env's Python version "3.11", libpython's directory)."""
    code = (
        "import pathlib, sys, sysconfig, importlib.util as u; s = u.find_spec('pytriton'); "
        "print(pathlib.Path(s.origin).parent / 'tritonserver' if s else ''); "
        "print(f'{sys.version_info[0]}.{sys.version_info[1]}'); print(sysconfig.get_config_var('LIBDIR'))"
    )
    dist, version, libdir = _env_python(env, code).splitlines()
    if not dist or not (Path(dist) / "bin" / "tritonserver").exists():
        raise ServerError(
            f"{env} has no nvidia-pytriton (tritonserver): rebuild it with `make .venv-serve/.installed`"
        )
    return Path(dist), version, Path(libdir)


def prepare(env: Path, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """The backend directory in `workdir` and (the binary's argv head, the environment)."""
    dist, version, libdir = triton_dist(env)
    stub = dist / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        raise ServerError(
            f"nvidia-pytriton ships no Python-backend stub for Python {version}; use Python 3.8-3.13"
        )
    python = workdir / "backends" / "python"
    shutil.rmtree(workdir / "backends", ignore_errors=True)
    python.mkdir(parents=True)
    for item in (dist / "backends" / "python").iterdir():
        if item.is_file():
            os.symlink(item, python / item.name)
    shutil.copy(stub, python / "triton_python_backend_stub")
    environ = dict(os.environ)
    libs = [str(dist.parent.parent / "nvidia_pytriton.libs"), str(libdir)]
    environ["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [p for p in [environ.get("LD_LIBRARY_PATH")] if p])
    environ["PATH"] = os.pathsep.join([str(env / "bin"), environ.get("PATH", "")])
    environ.pop("PYTHONPATH", None)
    argv = [
        str(dist / "bin" / "tritonserver"),
        f"--backend-directory={workdir / 'backends'}",
        f"--cache-directory={dist / 'caches'}",
    ]
    return argv, environ


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One tritonserver process serving `repo` on 127.0.0.1 (gRPC `grpc_port`; HTTP and metrics
    off unless given). Use as a context manager, or start() / stop()."""

    def __init__(
        self,
        repo: str | os.PathLike[str],
        *,
        grpc_port: int = 8001,
        http_port: int | None = None,
        env: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        log: str | os.PathLike[str] | None = None,
        stop_timeout_s: float = 30.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.repo = Path(repo).absolute()
        if not self.repo.is_dir():
            raise ConfigError(
                f"no model repository at {self.repo}: write one with `tickformer serve ART --repo DIR`"
            )
        self.env = server_env(env)
        self.grpc_port, self.http_port, self.host = grpc_port, http_port, host
        self.workdir = self.repo.parent / f".tritonserver-{grpc_port}"  # backends/ and the log
        self.log = Path(log) if log is not None else self.workdir / "tritonserver.log"
        self.stop_timeout_s = stop_timeout_s
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    def command(self) -> tuple[list[str], dict[str, str]]:
        argv, environ = prepare(self.env, self.workdir)
        argv += [
            f"--model-repository={self.repo}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--allow-http={'true' if self.http_port else 'false'}",
            "--allow-metrics=false",
            "--exit-timeout-secs=5",
            "--log-verbose=0",
            *self.extra_args,
        ]
        if self.http_port:
            argv += [f"--http-address={self.host}", f"--http-port={self.http_port}"]
        return argv, environ

    def start(self, ready_timeout_s: float = 120.0) -> Server:
        argv, environ = self.command()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, env=environ, stdout=log, stderr=subprocess.STDOUT)
        self.wait_ready(ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        """Until every model in the repository is ready (gRPC health), the process exits
        (ServerError with the log's last lines) or `timeout_s` passes."""
        import tritonclient.grpc as grpcclient  # the `serve` extra

        deadline = time.monotonic() + timeout_s
        client = grpcclient.InferenceServerClient(self.url)
        try:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise ServerError(f"tritonserver exited with {self.proc.returncode}: {self.tail()}")
                try:
                    if client.is_server_ready():
                        return
                except Exception:  # noqa: BLE001 -- not listening yet
                    pass
                time.sleep(0.2)
        finally:
            client.close()
        self.stop()
        raise ServerError(f"tritonserver on {self.url} was not ready after {timeout_s:g} s: {self.tail()}")

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) + f" (log: {self.log})"

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit status (None if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_until_signalled(server: Server, out=sys.stdout) -> int:
    """Start `server` and wait; SIGTERM or SIGINT stops it cleanly (the exit status: 0 when the
    server stopped on our signal)."""
    stopping = []

    def handler(signum: int, _frame: object) -> None:
        stopping.append(signum)
        if server.proc is not None and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGTERM)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        print(
            f"serving {server.repo} on {server.url} (gRPC); stop with Ctrl-C or SIGTERM", file=out, flush=True
        )
        assert server.proc is not None
        while server.proc.poll() is None:
            try:
                server.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                continue
        code = server.stop()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if stopping:
        note = (
            ""
            if code == 0
            else ": streams still open at the exit timeout were dropped; their clients restart them"
        )
        print(
            f"stopped (signal {signal.Signals(stopping[0]).name}; tritonserver exit {code}{note})",
            file=out,
            flush=True,
        )
        return 0
    raise ServerError(f"tritonserver exited by itself with {code}: {server.tail()}")
