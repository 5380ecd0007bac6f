"""Shared helpers of the adversarial suite (no tests here)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
"""The repository root (children import ``merkle_memory`` from here)."""


def soak_enabled(config: pytest.Config) -> bool:
    """True when ``MERKLE_MEMORY_SOAK=1`` is set or ``--soak`` was given (if registered)."""
    if os.environ.get("MERKLE_MEMORY_SOAK", "") not in ("", "0"):
        return True
    return bool(config.getoption("--soak", default=False))


def child_env() -> dict[str, str]:
    """Environment for a child Python that must import this checkout's ``merkle_memory``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_cli(
    *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m merkle_memory ARGS`` in a subprocess and return the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "merkle_memory", *args],
        input=stdin,
        capture_output=True,
        env=child_env(),
        timeout=timeout,
        check=False,
    )


def assert_one_error_line(stderr: str) -> None:
    """Assert ``stderr`` is exactly one line starting ``error: `` and holds no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.rstrip("\n").split("\n")
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr


@contextlib.contextmanager
def unreadable(path: Path) -> Iterator[str]:
    """Make ``path`` unreadable for the duration of the block; yields how it was done.

    As an ordinary user this is ``chmod 000``. As root (CI containers), permission bits do not
    stop reads, so every ``open``/``os.open`` of that path in this process is made to raise
    ``PermissionError(EACCES)`` instead: the same exception a real unreadable file gives.
    """
    if os.geteuid() != 0:
        old = path.stat().st_mode
        path.chmod(0)
        try:
            yield "chmod 000"
        finally:
            path.chmod(old)
        return
    target = os.path.realpath(path)
    real_open = io.open
    real_os_open = os.open

    def denied(file: Any) -> bool:
        return (
            isinstance(file, (str, bytes, os.PathLike))
            and os.path.realpath(os.fsdecode(file)) == target
        )

    def fake_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if denied(file):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    def fake_os_open(file: Any, *args: Any, **kwargs: Any) -> int:
        if denied(file):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(file))
        return real_os_open(file, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("builtins.open", fake_open)
        patch.setattr(io, "open", fake_open)
        patch.setattr(os, "open", fake_os_open)
        yield "open() raising EACCES (running as root, chmod 000 would not stop reads)"
