"""MkDocs hooks (named in `mkdocs.yml`): the reference pages are generated from the code on
every build (`scripts/docs_reference.py`) and handed to MkDocs in place of the stubs kept in
`docs/reference/` (which only say how to see the page, for readers of the checkout)."""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from docs_reference import PAGES


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, page in PAGES.items():
        stub = files.get_file_from_path(uri)
        if stub is not None:
            files.remove(stub)
        files.append(File.generated(config, uri, content=page()))
    return files
