"""The package is ready to publish (issue 16 item 10): LICENSE, PEP 639 metadata, classifiers,
URLs, authors, and a README that opens with the two commands.

Checked statically from pyproject.toml (building a wheel needs the network for the build
backend and takes tens of seconds, so it is not part of the suite; the command and what it
printed are in the CHANGELOG entry of issue 16 item 10).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from typing import Any

from support import REPO

APACHE_2_SHA256 = "0d542e0c8804e39aa7f37eb00da5a762149dc682d7829451287e11b938e94594"
"""SHA-256 of the Apache License 2.0 text, terms and conditions only (no appendix), as
published at apache.org and shipped by most Apache-2.0 projects."""


def _project() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        data: dict[str, Any] = tomllib.load(handle)
    return data


def test_license_is_apache_2_as_a_pep_639_expression_with_its_file() -> None:
    """license = "Apache-2.0" (an SPDX expression, not a table), license-files names LICENSE,
    which holds the exact Apache 2.0 text; no License classifier (PEP 639 forbids both)."""
    project = _project()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256
    assert b"Version 2.0, January 2004" in text[:200]
    assert [c for c in project["classifiers"] if c.startswith("License ::")] == []


def test_build_backend_supports_pep_639() -> None:
    """The build needs setuptools 77 or newer (license expressions and license-files)."""
    system = _project()["build-system"]
    assert system["build-backend"] == "setuptools.build_meta"
    assert system["requires"] == ["setuptools>=77"]


def test_classifiers_name_versions_typing_and_status() -> None:
    """Python versions from requires-python's minimum up, 3-only, typed, a development
    status, POSIX (the locks use fcntl)."""
    project = _project()["project"]
    classifiers = project["classifiers"]
    assert project["requires-python"] == ">=3.11"
    versions = [
        c.rsplit(" :: ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions == ["3.11", "3.12", "3.13"]
    for needed in (
        "Programming Language :: Python :: 3 :: Only",
        "Typing :: Typed",
        "Development Status :: 3 - Alpha",
        "Operating System :: POSIX",
    ):
        assert needed in classifiers
    assert classifiers == sorted(classifiers)
    assert (REPO / "merkle_memory" / "py.typed").is_file()
    assert _project()["tool"]["setuptools"]["package-data"]["merkle_memory"] == ["py.typed"]


def test_urls_authors_and_readme() -> None:
    """Homepage, Documentation, Repository, Issues and Changelog URLs (https), an author,
    the README as the long description, no runtime dependency."""
    project = _project()["project"]
    urls = project["urls"]
    assert sorted(urls) == ["Changelog", "Documentation", "Homepage", "Issues", "Repository"]
    assert all(url.startswith("https://") for url in urls.values())
    assert project["authors"] == [{"name": "The merkle_memory maintainers"}]
    assert project["readme"] == "README.md"
    assert project["dependencies"] == []


def test_readme_opens_with_the_two_commands_and_links_absolutely() -> None:
    """The README's first block is the two commands (run a transcript, run the suite); its
    links to files of the repository are absolute, so they work on the package index page."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first is not None and text.index("```sh") < text.index("\n## ")
    assert first.group(1).splitlines() == [
        "python -m merkle_memory dag import examples/claude_code_session.jsonl --json",
        "pip install -e '.[test]' && python -m pytest",
    ]
    relative = re.findall(r"\]\((?!https://|#)([^)]+)\)", text)
    assert relative == []
    assert "pip install merkle_memory" in text
