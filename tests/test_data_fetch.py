"""``jtcse data fetch`` against a real local HTTP server (tests/helpers/file_server.py): resumed, checked,
all-or-nothing downloads; the SentEval and STS-B archives unpacked into the layouts the evaluator reads."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from helpers.cli import invoke_cli, one_error_line
from helpers.file_server import FileServer
from helpers.files import snapshot
from helpers.sts import LetterCounts, write_senteval_dir, write_stsb

from jtcse.errors import JTCSEError
from jtcse.fetch import DEFAULT_MANIFEST, fetch_dataset, load_manifest
from jtcse.fetch.dataset import MARKER, download_dir_for
from jtcse.fetch.download import part_path
from jtcse.output_paths import RECORD, FolderOutput

BODY = b"".join(f"sentence number {i} of a tiny corpus\n".encode() for i in range(5000))  # ~190 kB


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def toml_value(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings and integers are written alike in JSON and TOML


def write_manifest(path: Path, datasets: dict[str, list[dict]], **extra: dict) -> Path:
    """A manifest with one dataset per key (``files`` entries as given)."""
    lines = ["schema = 1"]
    for name, files in datasets.items():
        lines += [f"[datasets.{name}]", f'summary = "test data {name}"']
        lines += [f"{key} = {toml_value(value)}" for key, value in extra.get(name, {}).items()]
        for entry in files:
            lines.append(f"[[datasets.{name}.files]]")
            lines += [f"{key} = {toml_value(value)}" for key, value in entry.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def corpus_manifest(tmp_path: Path, server: FileServer, body: bytes = BODY, **file_keys) -> Path:
    entry = {"name": "corpus.txt", "url": server.url("/corpus.txt"), "sha256": sha(body), "size": len(body)}
    entry.update(file_keys)
    return write_manifest(tmp_path / "manifest.toml", {"corpus": [{k: v for k, v in entry.items() if v is not None}]})


def tar_bytes(root: Path, mode: str = "w", extra: dict[str, bytes] | None = None) -> bytes:
    """Every file under ``root`` (names relative to it) plus ``extra`` name -> bytes, as a tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def killed_download(out: Path) -> Path:
    """The ``.part`` of ``corpus.txt`` as a fetch killed mid-download leaves it: in ``OUT.download/``, whose record
    (written before the download starts) lists it."""
    FolderOutput(download_dir_for(out), "jtcse data fetch").add("corpus.txt", "corpus.txt.part")
    return part_path(download_dir_for(out) / "corpus.txt")


def earlier_fetch(folder: Path, dataset: str) -> None:
    """A folder as another fetch of ``dataset`` left it: its jtcse_data.json, listed in its record."""
    FolderOutput(folder, "jtcse data fetch").add(MARKER)
    (folder / MARKER).write_text(json.dumps({"dataset": dataset, "files": []}), encoding="utf-8")


def leftovers(tmp_path: Path) -> list[str]:
    """Everything in ``tmp_path`` but the manifest: what a fetch left beside its output."""
    return sorted(p.name for p in tmp_path.iterdir() if p.name != "manifest.toml")


@pytest.fixture
def server():
    with FileServer({"/corpus.txt": BODY}) as running:
        yield running


def test_the_manifest_names_the_papers_data_with_pinned_or_declared_unpinned_sources():
    manifest = load_manifest()
    assert manifest.path == DEFAULT_MANIFEST
    assert {"wiki1m", "senteval-sts", "stsb", "rtt-pairs"} <= set(manifest.datasets)
    wiki = manifest.dataset("wiki1m")
    assert wiki.files[0].sha256 == "7b1825863a99aa76479b0456f7c210539dfaeeb69598b41fb4de4f524dd5a706"
    assert "/resolve/e145e8bb659b2aa2669f32ef79cb4cdef6c58fef/" in wiki.files[0].url  # pinned to a commit
    assert manifest.dataset("senteval-sts").files[0].keep == ("STS", "SICK")
    for entry in manifest.datasets.values():
        assert entry.summary and (entry.licence or not entry.available)
    with pytest.raises(JTCSEError, match=r"rtt-pairs cannot be fetched: .*jtcse rtt"):
        manifest.dataset("rtt-pairs")
    with pytest.raises(JTCSEError, match=r"unknown dataset 'wiki2m'; manifest.toml lists: wiki1m, senteval-sts"):
        manifest.dataset("wiki2m")


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"nmae": "x"}, r"files\[0\]: unknown key 'nmae'; valid keys: also, keep, name, sha256, size, unpack, url"),
        ({"name": "x", "url": "ftp://h/x"}, r"'url' must be an http\(s\) URL"),
        ({"name": "x", "url": "https://h/x", "sha256": "ABC"}, r"'sha256' must be 64 lower-case hex digits"),
        ({"name": "x", "url": "https://h/x", "unpack": "zip"}, r"'unpack' must be one of copy, tar, not 'zip'"),
        ({"name": "x", "url": "https://h/x", "unpack": "tar"}, r"a tar needs 'keep'"),
        ({"name": "../x", "url": "https://h/x"}, r"'name' must be a plain file name"),
    ],
)
def test_manifest_mistakes_are_one_line_naming_the_key(tmp_path, entry, message):
    path = write_manifest(tmp_path / "manifest.toml", {"d": [entry]})
    with pytest.raises(JTCSEError, match=message):
        load_manifest(path)


def test_fetch_writes_the_checked_file_and_nothing_beside_it(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    result = fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert result.status == "fetched" and result.entries == ["corpus.txt"] and result.unpinned == []
    assert (out / "corpus.txt").read_bytes() == BODY
    marker = json.loads((out / MARKER).read_text())
    assert marker["dataset"] == "corpus" and marker["files"][0]["sha256"] == sha(BODY) and marker["files"][0]["pinned"]
    assert leftovers(tmp_path) == ["corpus"]  # no .download, .tmp or .lock left
    assert [(r.range, r.status) for r in server.log] == [(None, 200)]

    again = fetch_dataset("corpus", out, manifest=manifest, progress=False)  # same dataset, same pins
    assert again.status == "already" and len(server.log) == 1


def test_a_server_dying_mid_file_keeps_the_part_and_the_next_call_resumes_it(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    server.die_after["/corpus.txt"] = 70_000
    with pytest.raises(JTCSEError, match=r"broke off after 0.1 MiB of 0.2 MiB .*kept and the next run resumes"):
        fetch_dataset("corpus", out, manifest=manifest, progress=False)
    part = part_path(download_dir_for(out) / "corpus.txt")
    assert part.read_bytes() == BODY[:70_000] and not out.exists()

    fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert (out / "corpus.txt").read_bytes() == BODY
    assert [(r.range, r.status, r.sent) for r in server.log] == [
        (None, 200, 70_000),
        ("bytes=70000-", 206, len(BODY) - 70_000),
    ]
    assert leftovers(tmp_path) == ["corpus"]


def test_a_truncated_part_from_a_killed_run_is_continued_not_restarted(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    part = killed_download(out)
    part.write_bytes(BODY[:12_345])
    fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert (out / "corpus.txt").read_bytes() == BODY
    assert [(r.range, r.status, r.sent) for r in server.log] == [("bytes=12345-", 206, len(BODY) - 12_345)]


def test_a_whole_part_is_finished_from_the_servers_416(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    part = killed_download(out)
    part.write_bytes(BODY)  # killed between the last byte and the rename
    fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert (out / "corpus.txt").read_bytes() == BODY
    assert [(r.range, r.status) for r in server.log] == [(f"bytes={len(BODY)}-", 416)]


def test_a_server_without_range_support_restarts_the_file_cleanly(tmp_path):
    with FileServer({"/corpus.txt": BODY}, ranges=False) as server:
        manifest = corpus_manifest(tmp_path, server)
        out = tmp_path / "corpus"
        part = killed_download(out)
        part.write_bytes(b"x" * 5000)  # would corrupt the file if the 200 answer were appended
        fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert (out / "corpus.txt").read_bytes() == BODY
    assert [(r.range, r.status, r.sent) for r in server.log] == [("bytes=5000-", 200, len(BODY))]


def test_a_wrong_checksum_leaves_nothing_and_the_next_try_starts_afresh(tmp_path, server):
    out = tmp_path / "corpus"
    bad = corpus_manifest(tmp_path, server, sha256=sha(b"another file"))
    with pytest.raises(JTCSEError, match=r"checksum mismatch for corpus.txt: its sha256 is [0-9a-f]{64}, the manifest"):
        fetch_dataset("corpus", out, manifest=bad, progress=False)
    assert leftovers(tmp_path) == []  # no output, no .part, no download folder, no lock

    fetch_dataset("corpus", out, manifest=corpus_manifest(tmp_path, server), progress=False)
    assert [r.range for r in server.log] == [None, None]  # the bad bytes were not resumed
    assert (out / "corpus.txt").read_bytes() == BODY


def test_a_size_other_than_the_manifests_is_refused_before_the_body(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server, size=len(BODY) + 1)
    with pytest.raises(
        JTCSEError, match=rf"is {len(BODY)} bytes, the manifest says {len(BODY) + 1}: the source changed"
    ):
        fetch_dataset("corpus", tmp_path / "corpus", manifest=manifest, progress=False)
    assert leftovers(tmp_path) == []


def test_http_errors_are_one_line_and_leave_nothing(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server, url=server.url("/missing.txt"))
    with pytest.raises(JTCSEError, match=r"cannot download http://127.0.0.1:\d+/missing.txt: HTTP 404 Not Found"):
        fetch_dataset("corpus", tmp_path / "corpus", manifest=manifest, progress=False)
    assert leftovers(tmp_path) == []


def test_a_folder_no_fetch_made_is_never_replaced_another_fetchs_only_with_overwrite(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    before = snapshot([out])
    for overwrite in (False, True):
        with pytest.raises(JTCSEError, match=r"corpus/notes.txt was not written by jtcse data fetch .* or not"):
            fetch_dataset("corpus", out, manifest=manifest, overwrite=overwrite, progress=False)
    assert snapshot([out]) == before and server.log == []

    other = tmp_path / "other"
    earlier_fetch(other, "stsb")  # another fetch's folder
    with pytest.raises(JTCSEError, match=r"other is not empty .* pass --overwrite to replace that earlier fetch"):
        fetch_dataset("corpus", other, manifest=manifest, progress=False)
    fetch_dataset("corpus", other, manifest=manifest, overwrite=True, progress=False)
    assert sorted(p.name for p in other.iterdir()) == ["corpus.txt", MARKER, RECORD]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert fetch_dataset("corpus", empty, manifest=manifest, progress=False).status == "fetched"


@pytest.mark.cli
@pytest.mark.parametrize(
    "output, message",
    [
        (".", r"Error: \. is the working directory \(.*/work/here\); jtcse data fetch replaces its output"),
        ("..", r"Error: \.\. is a folder holding the working directory \(.*/work\)"),
        ("../..", r"Error: \.\./\.\. is a folder holding the working directory"),
        ("~", r"Error: ~ is your home folder \(.*/home\)"),
        ("../mine", r"Error: \.\./mine/notes.txt was not written by jtcse data fetch"),
        ("../fetched", r"Error: The output folder \.\./fetched holds the input .*fetched/manifest.toml"),
    ],
    ids=["cwd", "parent", "grandparent", "home", "foreign", "holds-manifest"],
)
def test_overwrite_never_empties_the_working_directory_home_or_a_folder_of_the_users(tmp_path, server, output, message):
    """Each of these emptied a folder of the user's (`-o .` failed on an empty name): one line, nothing touched."""
    work, home = tmp_path / "work", tmp_path / "home"
    (work / "here").mkdir(parents=True)  # the working directory: empty
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("mine", encoding="utf-8")
    earlier_fetch(work / "fetched", "corpus")  # made by a fetch, and the user keeps their manifest in it
    manifest = corpus_manifest(work / "fetched", server)
    home.mkdir()
    (home / ".bashrc").write_text("# mine", encoding="utf-8")
    before = snapshot([tmp_path])
    result = invoke_cli("data", "fetch", "corpus", "-o", output, "--overwrite", "--manifest", manifest,
                        "--no-progress", cwd=work / "here", HOME=home)  # fmt: skip
    assert re.match(message, one_error_line(result)), one_error_line(result)
    assert snapshot([tmp_path]) == before and sorted(p.name for p in tmp_path.iterdir()) == ["home", "work"]
    assert server.log == []


def test_an_unpinned_file_needs_allow_unpinned_and_reports_its_sha256(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server, sha256=None, size=None)
    out = tmp_path / "corpus"
    with pytest.raises(JTCSEError, match=r"no published sha256 is pinned for corpus.txt .*--allow-unpinned"):
        fetch_dataset("corpus", out, manifest=manifest, progress=False)
    assert server.log == [] and leftovers(tmp_path) == []
    result = fetch_dataset("corpus", out, manifest=manifest, allow_unpinned=True, progress=False)
    assert result.unpinned == ["corpus.txt"] and result.sha256 == {"corpus.txt": sha(BODY)}
    assert json.loads((out / MARKER).read_text())["files"][0]["pinned"] is False
    assert fetch_dataset("corpus", out, manifest=manifest, progress=False).status == "already"  # no flag needed
    assert len(server.log) == 1


def test_the_senteval_archive_unpacks_into_the_layout_the_evaluator_reads(tmp_path):
    from jtcse.evaluation.senteval_sts import run_senteval_sts

    source = tmp_path / "src"
    expected = write_senteval_dir(source / "SentEval" / "data" / "downstream")  # the archive's own top folders
    (source / "SentEval" / "data" / "downstream" / "MR").mkdir()
    (source / "SentEval" / "data" / "downstream" / "MR" / "rt-polarity.pos").write_text("good\n", encoding="utf-8")
    archive = tar_bytes(source)
    with FileServer({"/senteval.tar": archive}) as server:
        manifest = write_manifest(tmp_path / "manifest.toml", {"senteval-sts": [
            {"name": "senteval.tar", "url": server.url("/senteval.tar"), "sha256": sha(archive), "unpack": "tar",
             "keep": ["STS", "SICK"]},
        ]})  # fmt: skip
        out = tmp_path / "senteval"
        result = fetch_dataset("senteval-sts", out, manifest=manifest, progress=False)
    assert result.entries == ["SICK", "STS"]
    assert sorted(p.name for p in out.iterdir()) == ["SICK", "STS", MARKER, RECORD]
    report = run_senteval_sts(LetterCounts(), out)
    assert report.missing == {}
    for task, rho in expected.items():
        assert report.results[task].spearman == pytest.approx(rho, abs=1e-12), task


def test_the_stsb_archive_loses_its_top_folder_and_keeps_the_named_files(tmp_path):
    from jtcse.evaluation.sts import read_stsb_file

    source = tmp_path / "src" / "stsbenchmark"
    for split in ("train", "dev", "test"):
        write_stsb(source / f"sts-{split}.csv")
    (source / "readme.txt").write_text("STS Benchmark\n", encoding="utf-8")
    (source / "correlation.pl").write_text("# not wanted\n", encoding="utf-8")
    archive = tar_bytes(source.parent, mode="w:gz")
    with FileServer({"/Stsbenchmark.tar.gz": archive}) as server:
        manifest = write_manifest(tmp_path / "manifest.toml", {"stsb": [
            {"name": "Stsbenchmark.tar.gz", "url": server.url("/Stsbenchmark.tar.gz"), "sha256": sha(archive),
             "unpack": "tar", "keep": ["sts-train.csv", "sts-dev.csv", "sts-test.csv"], "also": ["readme.txt", "LICENSE.txt"]},
        ]})  # fmt: skip
        fetch_dataset("stsb", tmp_path / "stsb", manifest=manifest, progress=False)
    names = sorted(p.name for p in (tmp_path / "stsb").iterdir())
    assert names == [MARKER, RECORD, "readme.txt", "sts-dev.csv", "sts-test.csv", "sts-train.csv"]
    assert len(read_stsb_file(tmp_path / "stsb" / "sts-dev.csv")) == 6


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"../evil.txt": b"x", "STS/a.txt": b"a", "SICK/b.txt": b"b"},
            r"holds an entry outside its folder \('../evil.txt'\)",
        ),
        ({"STS/a.txt": b"a"}, r"has no folder holding all of STS, SICK; the archive does not match"),
    ],
)
def test_an_archive_that_escapes_or_lacks_the_kept_entries_is_refused(tmp_path, extra, message):
    (tmp_path / "empty").mkdir()
    archive = tar_bytes(tmp_path / "empty", extra=extra)
    with FileServer({"/a.tar": archive}) as server:
        manifest = write_manifest(tmp_path / "manifest.toml", {"sts": [
            {"name": "a.tar", "url": server.url("/a.tar"), "sha256": sha(archive), "unpack": "tar", "keep": ["STS", "SICK"]},
        ]})  # fmt: skip
        with pytest.raises(JTCSEError, match=message):
            fetch_dataset("sts", tmp_path / "sts", manifest=manifest, progress=False)
    assert not (tmp_path / "sts").exists() and not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "sts.tmp").exists()


@pytest.mark.cli
def test_cli_fetch_reports_done_then_nothing_to_do_and_refuses_a_foreign_folder(tmp_path, server):
    manifest = corpus_manifest(tmp_path, server)
    out = tmp_path / "corpus"
    first = invoke_cli("data", "fetch", "corpus", "--to", out, "--manifest", manifest, "--no-progress")
    assert first.returncode == 0, first.stderr
    assert f"corpus written to {out}: corpus.txt" in first.stdout
    second = invoke_cli("data", "fetch", "corpus", "-o", out, "--manifest", manifest)
    assert second.returncode == 0 and "already in" in second.stdout
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x", encoding="utf-8")
    refused = invoke_cli("data", "fetch", "corpus", "-o", tmp_path / "other", "--manifest", manifest)
    assert one_error_line(refused).startswith(f"Error: {tmp_path / 'other' / 'x'} was not written by jtcse data fetch")


@pytest.mark.cli
def test_cli_help_teaches_every_dataset_of_the_manifest():
    result = invoke_cli("data", "fetch", "--help", COLUMNS=100)
    assert result.returncode == 0, result.stderr
    for name in load_manifest().datasets:
        assert name in result.stdout, name
    assert "data/README.md" in result.stdout and "Example: jtcse data fetch wiki1m -o" in result.stdout
    listing = invoke_cli("data", "list")
    assert listing.returncode == 0 and "wiki1m" in listing.stdout and "needs --allow-unpinned" in listing.stdout
