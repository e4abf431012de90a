"""Byte snapshots of output files, for tests that prove a command touched nothing."""

from __future__ import annotations

from pathlib import Path


def snapshot(paths: list[Path]) -> dict[str, bytes]:
    """Bytes of every file under/at ``paths`` (folders walked), to prove nothing changed."""
    files = [
        f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []) if f.is_file()
    ]
    return {str(f): f.read_bytes() for f in files}
