"""Getting the data a recipe names: ``data/manifest.toml`` (URLs, sizes, sha256) and ``jtcse data fetch``.

:func:`fetch_dataset` downloads resumably (HTTP ``Range`` into ``.part`` files), checks every file's
checksum and unpacks atomically into the layout the commands read; see ``data/README.md``.
"""

from jtcse.fetch.dataset import FetchResult, fetch_dataset
from jtcse.fetch.manifest import DEFAULT_MANIFEST, Dataset, Manifest, SourceFile, load_manifest

__all__ = ["DEFAULT_MANIFEST", "Dataset", "FetchResult", "Manifest", "SourceFile", "fetch_dataset", "load_manifest"]
