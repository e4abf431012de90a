"""Write a downloaded file into a dataset folder: as it is (``copy``) or the chosen entries of a tar (``tar``)."""

from __future__ import annotations

import posixpath
import shutil
import tarfile
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.fetch.manifest import SourceFile


def _clean(name: str, archive: Path) -> str:
    """A member name as a safe relative POSIX path (no absolute path, no ``..``)."""
    path = posixpath.normpath(name)
    if path.startswith(("/", "../")) or path == ".." or "\\" in name:
        raise JTCSEError(f"{archive.name} holds an entry outside its folder ({name!r}); refusing to unpack it.")
    return "" if path == "." else path


def find_root(names: list[str], keep: tuple[str, ...]) -> str:
    """The shallowest folder (``""`` or ``"a/b/"``) of an archive under which every ``keep`` entry exists.

    SimCSE's SentEval tar and the STS Benchmark tar.gz put their files under a top folder of their own;
    finding it from the entries asked for keeps the manifest free of guesses about that folder's name.
    """
    present = set(names)
    for name in names:  # every folder that holds something, even when the tar lists no entry for it
        parts = name.split("/")
        present.update("/".join(parts[:i]) for i in range(1, len(parts)))
    folders = sorted({""} | {name + "/" for name in present}, key=lambda f: (f.count("/"), f))
    for folder in folders:
        if all(folder + entry in present for entry in keep):
            return folder
    raise KeyError(keep)


def unpack_tar(archive: Path, out_dir: Path, keep: tuple[str, ...], also: tuple[str, ...] = ()) -> list[str]:
    """Extract the ``keep`` entries (required) and ``also`` entries (when present) of the folder that holds all
    of ``keep``, into ``out_dir``, that folder's prefix stripped. Returns the top-level names written.

    Links, devices and entries that would land outside ``out_dir`` are refused (and tarfile's ``data``
    filter is applied where Python has it).
    """
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as err:
        raise JTCSEError(f"{archive.name} is not a readable tar archive: {err}") from None
    with tar:
        members = tar.getmembers()
        names = [_clean(m.name, archive) for m in members]
        try:
            root = find_root(names, keep)
        except KeyError:
            raise JTCSEError(
                f"{archive.name} has no folder holding all of {', '.join(keep)}; the archive does not match "
                "data/manifest.toml"
            ) from None
        wanted = set(keep) | set(also)
        chosen = []
        for member, name in zip(members, names, strict=True):
            if not name.startswith(root) or name == root.rstrip("/"):
                continue
            relative = name[len(root) :]
            if relative.split("/", 1)[0] not in wanted:
                continue
            if not (member.isfile() or member.isdir()):
                raise JTCSEError(f"{archive.name}: {name} is a link or special file; refusing to unpack it.")
            member.name = relative
            chosen.append(member)
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        try:
            tar.extractall(out_dir, members=chosen, **extra)
        except (tarfile.TarError, OSError) as err:
            raise JTCSEError(f"cannot unpack {archive.name}: {err}") from None
    return sorted({m.name.split("/", 1)[0] for m in chosen})


def unpack(source: SourceFile, downloaded: Path, out_dir: Path) -> list[str]:
    """Put ``downloaded`` (the verified file of ``source``) into ``out_dir``; returns the top-level names written."""
    if source.unpack == "copy":
        shutil.copyfile(downloaded, out_dir / source.name)
        return [source.name]
    return unpack_tar(downloaded, out_dir, source.keep, source.also)
