"""One file over HTTP(S), resumable and checked: :func:`download`.

The bytes go to ``<dest>.part``; a ``.part`` left by an interrupted earlier call is continued with an HTTP
``Range: bytes=N-`` request (``206`` appends; a server that ignores ``Range`` and answers ``200`` restarts the
file from byte 0). Size (when known) and SHA-256 are checked over the whole file before the ``.part`` is
renamed to ``dest``; a mismatch deletes the ``.part``, so the next call starts afresh instead of resuming
bad bytes. Written by hand on ``httpx`` because the downloaders at hand do not resume an arbitrary URL
(``huggingface_hub`` resumes Hub files only; ``pooch`` restarts from zero).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
from pathlib import Path

from jtcse.errors import JTCSEError

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
PART_SUFFIX = ".part"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def part_path(dest: str | Path) -> Path:
    """Where the bytes of ``dest`` collect while they download."""
    dest = Path(dest)
    return dest.with_name(dest.name + PART_SUFFIX)


def sha256_of(path: Path, hasher=None) -> hashlib._Hash:
    """``hasher`` (a new SHA-256 by default) updated with the bytes of ``path``."""
    hasher = hasher or hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            hasher.update(block)
    return hasher


def make_client(timeout: float = 60.0):
    """The ``httpx.Client`` downloads use: redirects followed (Hub files redirect to a CDN), a read timeout."""
    import httpx

    from jtcse import __version__

    return httpx.Client(
        follow_redirects=True,
        timeout=httpx.Timeout(timeout, connect=min(timeout, 20.0)),
        headers={"User-Agent": f"jtcse/{__version__} (data fetch)"},
        verify=_tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
    )


@functools.cache
def _tls_context(cert_file: str | None, cert_dir: str | None):
    """httpx's default certificate check, built once a process: loading the CA bundle costs about 25 ms of CPU,
    which every client paid. The arguments are the variables httpx reads to choose the bundle, so a changed
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` still gets its own context."""
    import httpx

    return httpx.create_ssl_context()


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MiB"


def _check_final(part: Path, dest: Path, hasher, written: int, *, sha256: str | None, size: int | None) -> str:
    """Size and checksum of the finished ``part``; on success it becomes ``dest``, on a mismatch it is deleted."""
    digest = hasher.hexdigest()
    problem = None
    if size is not None and written != size:
        problem = f"it has {written} bytes, the manifest says {size}"
    elif sha256 is not None and digest != sha256:
        problem = f"its sha256 is {digest}, the manifest says {sha256}"
    if problem:
        part.unlink(missing_ok=True)
        raise JTCSEError(
            f"checksum mismatch for {dest.name}: {problem}. The download was deleted, so the next run starts "
            "afresh; if the source changed on purpose, update data/manifest.toml."
        )
    part.replace(dest)
    return digest


def download(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    size: int | None = None,
    client=None,
    progress: bool = True,
) -> str:
    """Download ``url`` to ``dest`` (resuming ``dest.part``), check it, return its SHA-256 (hex).

    A ``dest`` already there with the right checksum is kept without a request. A transfer that breaks
    off (connection closed, timeout) keeps its ``.part`` and raises a one-line :class:`JTCSEError` that
    says how far it got: run again to resume. A wrong size or checksum raises and deletes the ``.part``.
    """
    import httpx
    from tqdm.auto import tqdm

    dest = Path(dest)
    part = part_path(dest)
    if dest.exists():
        if sha256 is not None and sha256_of(dest).hexdigest() == sha256:
            return sha256
        dest.unlink()
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:
        logger.warning("%s is longer than the file (%d > %d bytes); starting afresh.", part, offset, size)
        part.unlink()
        offset = 0
    own_client = client is None
    client = client or make_client()
    hasher = sha256_of(part) if offset else hashlib.sha256()
    written = offset
    total = size
    bar = None
    try:
        headers = {"Accept-Encoding": "identity"}  # the file's own bytes, so that ranges and checksums apply to them
        if offset:
            headers["Range"] = f"bytes={offset}-"
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 416 and offset:  # nothing after byte `offset`: the .part may be whole
                return _check_final(part, dest, hasher, written, sha256=sha256, size=size)
            if response.status_code >= 400:
                raise JTCSEError(f"cannot download {url}: HTTP {response.status_code} {response.reason_phrase}")
            mode = "ab"
            if offset and response.status_code == 206:
                match = _CONTENT_RANGE.match(response.headers.get("content-range", ""))
                if not match or int(match.group(1)) != offset:
                    raise JTCSEError(
                        f"cannot resume {url}: asked for bytes {offset}-, the server sent "
                        f"{response.headers.get('content-range', 'no Content-Range')}"
                    )
            elif offset:
                logger.warning("%s ignores Range requests: downloading %s again from the start.", url, dest.name)
                offset = written = 0
                hasher = hashlib.sha256()
                mode = "wb"
            length = response.headers.get("content-length")
            total = offset + int(length) if length and length.isdigit() else size
            if size is not None and total is not None and total != size:
                part.unlink(missing_ok=True)
                raise JTCSEError(
                    f"{url} is {total} bytes, the manifest says {size}: the source changed. Nothing was kept; "
                    "update data/manifest.toml if the change is expected."
                )
            bar = tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=dest.name,
                disable=not progress,
                leave=False,
            )
            with open(part, mode) as handle:
                for chunk in response.iter_raw():  # as the bytes arrive: a break keeps all that came
                    handle.write(chunk)
                    hasher.update(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
                    if size is not None and written > size:
                        break  # more bytes than the file has: _check_final reports it
    except httpx.TransportError as err:
        got = f"after {_mib(written)} of {_mib(total)}" if written else "before any byte arrived"
        kept = f"; {part} is kept and the next run resumes from there" if part.exists() and written else ""
        raise JTCSEError(
            f"download of {dest.name} from {url} broke off {got} ({type(err).__name__}: {err}){kept}. "
            "Run the same command again."
        ) from None
    finally:
        if bar is not None:
            bar.close()
        if own_client:
            client.close()
    return _check_final(part, dest, hasher, written, sha256=sha256, size=size)
