"""mkdocs hooks (mkdocs.yml): the READMEs become pages of the site without being copied.

- ``README.md`` is the home page; its links into ``docs/`` are made relative to it.
- ``scheduler/README.md`` and ``manifests/README.md`` stay beside the code they describe and
  appear as ``reference/scheduler.md`` and ``reference/manifests.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PAGES = {
    "index.md": "README.md",
    "reference/scheduler.md": "scheduler/README.md",
    "reference/manifests.md": "manifests/README.md",
}
# README.md's links as they read on the site: docs/<page> is a sibling of the home page, and
# the other READMEs are the pages above.
_README_LINKS = {
    "](docs/": "](",
    "](scheduler/README.md": "](reference/scheduler.md",
    "](manifests/README.md": "](reference/manifests.md",
}


def on_files(files: Files, config: Any) -> Files:
    for page, source in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        if source == "README.md":
            for old, new in _README_LINKS.items():
                text = text.replace(old, new)
        files.append(File.generated(config, page, content=text))
    return files
