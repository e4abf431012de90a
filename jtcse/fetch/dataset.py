"""``fetch_dataset``: download a manifest entry into a folder, checked and all-or-nothing.

First the output path is resolved (``-o .`` and ``-o ..`` name real folders) and refused, before anything is
written, when it is the working directory, a folder holding it, the home folder, a folder holding a file that no
fetch wrote (its ``jtcse_outputs.json`` does not list it), or a folder holding the manifest
(:func:`fetch_output`, :mod:`jtcse.output_paths`). Then, under the output's lock (:func:`jtcse.locking.output_lock`):

1. the output is inspected: absent or empty is fine; the same dataset already fetched from the same pinned
   sources (its ``jtcse_data.json`` says so) is a no-op; another fetch's folder is replaced only with
   ``overwrite``;
2. each file downloads into the sibling folder ``<output>.download/`` (resumable ``.part`` files, size and
   SHA-256 checked: :mod:`jtcse.fetch.download`; its own record lists them);
3. the files are unpacked into ``<output>.tmp`` with ``jtcse_data.json`` (what was fetched, from where, its
   checksums) and the record of every file in it, which then replaces the output in one rename
   (:meth:`~jtcse.output_paths.FolderOutput.replacing`);
4. ``<output>.download/`` is removed.

A failure at any step leaves the output as it was: an interrupted download keeps its ``.part`` to resume
from; a checksum mismatch deletes it; a verified file stays in ``<output>.download/`` until it is unpacked.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.fetch.download import download, make_client
from jtcse.fetch.manifest import Dataset, load_manifest
from jtcse.fetch.unpack import unpack
from jtcse.locking import atomic_write_json, output_lock
from jtcse.output_paths import RECORD, FolderOutput, resolved

MARKER = "jtcse_data.json"
DOWNLOAD_SUFFIX = ".download"


@dataclass
class FetchResult:
    """What :func:`fetch_dataset` did. ``status``: ``fetched`` or ``already`` (nothing to do)."""

    name: str
    output: Path
    status: str
    sha256: dict[str, str] = field(default_factory=dict)  # file name -> digest of what was downloaded
    unpinned: list[str] = field(default_factory=list)  # files fetched without a pinned checksum
    entries: list[str] = field(default_factory=list)  # top-level names written into the output


def download_dir_for(output: str | Path) -> Path:
    """``<output>.download``: where the files collect (and resume) before they are unpacked."""
    output = Path(output)
    return output.with_name(output.name + DOWNLOAD_SUFFIX)


def _pins(entry: Dataset) -> dict[str, str | None]:
    return {f.name: f.sha256 for f in entry.files}


def _finished(output: Path, entry: Dataset) -> bool:
    """Whether ``output`` holds ``entry`` fetched earlier from the same pinned sources."""
    try:
        marker = json.loads((output / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    pinned = {name: sha for name, sha in _pins(entry).items() if sha}
    recorded = {f.get("name"): f.get("sha256") for f in marker.get("files", []) if isinstance(f, dict)}
    return (
        marker.get("dataset") == entry.name
        and set(recorded) == set(_pins(entry))
        and all(recorded[name] == sha for name, sha in pinned.items())
    )


def fetch_output(output: str | Path, manifest: Path) -> FolderOutput:
    """``output`` (as the user gave it) as what ``jtcse data fetch`` writes (:class:`~jtcse.output_paths.FolderOutput`):
    replaced whole, so never the working directory, a folder holding it or home, never the manifest's folder, and
    only when every file in it is listed by an earlier fetch's record (``jtcse_outputs.json``); its ``.download/``
    beside it likewise."""
    beside = download_dir_for(resolved(output))
    return FolderOutput(output, "jtcse data fetch", inputs=[manifest], whole=True, beside=[beside])


def _check_output(output: Path, shown: Path, entry: Dataset, overwrite: bool) -> bool:
    """True when there is nothing to do; raises when ``output`` (``shown`` as the user gave it) holds another
    fetch and not ``overwrite`` (a folder with a file no fetch wrote was refused before: :func:`fetch_dataset`)."""
    if not output.is_dir() or not any(output.iterdir()):
        return False
    if not overwrite and _finished(output, entry):
        return True
    if not overwrite:
        held = ", ".join(sorted(p.name for p in output.iterdir())[:5])
        raise JTCSEError(
            f"{shown} is not empty ({held}) and holds no finished {entry.name} fetch; choose an empty or new "
            "folder, or pass --overwrite to replace that earlier fetch."
        )
    return False


def fetch_dataset(
    name: str,
    output: str | Path,
    *,
    manifest: str | Path | None = None,
    overwrite: bool = False,
    allow_unpinned: bool = False,
    progress: bool = True,
    client=None,
) -> FetchResult:
    """Fetch dataset ``name`` of the ``manifest`` (default ``data/manifest.toml``) into the folder ``output``.

    ``allow_unpinned``: also download files without a published SHA-256 (their computed digests are in
    the result's ``sha256`` so they can be pinned). ``client``: an ``httpx.Client`` (default: one per call).
    """
    loaded = load_manifest(manifest)
    entry = loaded.dataset(name)
    unpinned = [f.name for f in entry.unpinned]
    shown, output = Path(output), resolved(output)  # `-o .` / `-o ..`: the folder they name, not an empty name
    if output.exists() and not output.is_dir():
        raise JTCSEError(f"{shown} is a file; give a folder for {entry.name}.")
    out = fetch_output(shown, loaded.path)
    downloads_out = FolderOutput(download_dir_for(output), "jtcse data fetch")
    # before the lock is made beside it: never the working directory, home, a file no fetch wrote, or the manifest's
    out.check()
    downloads_out.check()
    with output_lock(output):
        out.check()
        if _check_output(output, shown, entry, overwrite):
            return FetchResult(name, shown, "already")
        if unpinned and not allow_unpinned:
            raise JTCSEError(
                f"{name}: no published sha256 is pinned for {', '.join(unpinned)} in the manifest, so the download "
                "cannot be checked. Pass --allow-unpinned to fetch it anyway; the sha256 it computes is printed so "
                "you can pin it in data/manifest.toml."
            )
        downloads = download_dir_for(output)
        downloads_out.add(*(name for f in entry.files for name in (f.name, f"{f.name}.part")))
        own_client = client is None
        client = client or make_client()
        digests: dict[str, str] = {}
        try:
            for source in entry.files:
                digests[source.name] = download(
                    source.url,
                    downloads / source.name,
                    sha256=source.sha256,
                    size=source.size,
                    client=client,
                    progress=progress,
                )
        except BaseException:
            if not any(p.name != RECORD for p in downloads.iterdir()):  # nothing to resume from: leave no folder
                shutil.rmtree(downloads)
            raise
        finally:
            if own_client:
                client.close()
        entries: list[str] = []
        with out.replacing() as new:
            tmp = new.path
            for source in entry.files:
                entries += unpack(source, downloads / source.name, tmp)
            record = {
                "dataset": name,
                "summary": entry.summary,
                "licence": entry.licence,
                "source": entry.source,
                "fetched": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "files": [
                    {"name": f.name, "url": f.url, "sha256": digests[f.name], "pinned": f.pinned, "unpack": f.unpack}
                    for f in entry.files
                ],
            }
            atomic_write_json(tmp / MARKER, record)
        shutil.rmtree(downloads, ignore_errors=True)  # (its record lists every file in it: all jtcse's)
    return FetchResult(name, shown, "fetched", digests, unpinned, sorted(set(entries)))
