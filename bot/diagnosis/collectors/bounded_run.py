"""Run one read-only command as an argv list (never a shell) inside a time and byte budget."""

from __future__ import annotations

import dataclasses
import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunResult:
    """What one bounded command produced; `truncated` says the byte cap cut stdout."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    elapsed_ms: int
    timed_out: bool = False
    truncated: bool = False
    missing: bool = False

    @property
    def ok(self) -> bool:
        """The command ran to completion and exited 0."""
        return self.returncode == 0 and not self.timed_out and not self.missing

    @property
    def shown(self) -> str:
        """The command as a human would type it."""
        return " ".join(self.argv)


def run_bounded(
    *, argv: Sequence[str], timeout_seconds: float, max_bytes: int, env: dict[str, str] | None = None
) -> RunResult:
    """Run argv without a shell; stop reading at max_bytes and kill the process at timeout_seconds."""
    args = tuple(argv)
    if not args or not all(isinstance(item, str) for item in args):
        raise ValueError("argv must be a non-empty list of strings")
    started = time.monotonic()
    if shutil.which(args[0]) is None:
        return RunResult(
            argv=args,
            returncode=None,
            stdout="",
            stderr=f"{args[0]}: command not found",
            elapsed_ms=0,
            missing=True,
        )
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
    sizes = {"stdout": 0, "stderr": 0}
    truncated = timed_out = False
    deadline = started + timeout_seconds
    with selectors.DefaultSelector() as selector:
        assert process.stdout is not None and process.stderr is not None
        selector.register(process.stdout, selectors.EVENT_READ, "stdout")
        selector.register(process.stderr, selectors.EVENT_READ, "stderr")
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=remaining):
                data = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                name = key.data
                room = max_bytes - sizes[name]
                if room > 0:
                    chunks[name].append(data[:room])
                sizes[name] += len(data)
                if name == "stdout" and sizes[name] > max_bytes:
                    truncated = True
            if truncated:
                break
    if timed_out or truncated:
        process.kill()
    try:
        returncode = process.wait(timeout=max(0.1, deadline - time.monotonic()) if not timed_out else 1)
    except subprocess.TimeoutExpired:
        process.kill()
        returncode = process.wait()
        timed_out = True
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return RunResult(
        argv=args,
        returncode=None if timed_out else returncode,
        stdout=b"".join(chunks["stdout"]).decode("utf-8", "replace"),
        stderr=b"".join(chunks["stderr"]).decode("utf-8", "replace"),
        elapsed_ms=int((time.monotonic() - started) * 1000),
        timed_out=timed_out,
        truncated=truncated,
    )
