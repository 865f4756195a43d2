"""The README is the front door: every link in it leads to a file that exists (with the
anchor it names, for links into the docs), and every `make` target and `manage.py` command it
names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _local_links(markdown: str) -> list[str]:
    return [link for link in LINK.findall(markdown) if not re.match(r"[a-z]+:", link)]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        out.add(text.replace(" ", "-"))
    return out


def _resolves(base: Path, link: str) -> str | None:
    """None when `link` (relative to `base`'s folder) names an existing file and anchor,
    else what is wrong."""
    path, _, anchor = link.partition("#")
    target = (base.parent / path).resolve() if path else base
    if not target.exists():
        return f"{link}: no file {target.relative_to(ROOT)}"
    markdown = target.read_text(encoding="utf-8") if target.suffix == ".md" else ""
    if anchor and markdown and anchor not in _anchors(markdown):
        return f"{link}: no heading #{anchor} in {target.name}"
    return None


def test_the_readme_indexes_every_doc():
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in _local_links(README)}
    assert [doc.name for doc in DOCS if doc.resolve() not in linked] == []


def test_every_link_in_the_readme_resolves():
    links = _local_links(README)
    assert "docs/screenshot-traces.png" in links
    assert [p for p in (_resolves(ROOT / "README.md", link) for link in links) if p] == []


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "CONTRIBUTING.md"], ids=lambda p: p.name)
def test_every_link_between_the_docs_resolves(doc):
    links = _local_links(doc.read_text(encoding="utf-8"))
    assert [p for p in (_resolves(doc, link) for link in links) if p] == []


def test_every_make_target_the_readme_names_exists():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))
    named = set(re.findall(r"\bmake ([a-z][\w-]*)", README))
    assert {"run", "test", "prod"} <= named
    assert sorted(named - targets) == []


def test_every_make_variable_the_readme_names_exists():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    variables = set(re.findall(r"^([A-Z]+) \?=", makefile, re.MULTILINE))
    named = set(re.findall(r"\bmake \w+ ([A-Z]+)=", README))
    assert "PORT" in named
    assert sorted(named - variables) == []


def test_every_manage_py_command_the_readme_names_exists():
    named = set(re.findall(r"manage\.py ([a-z][\w-]*)", README))
    assert {"demo", "totp"} <= named
    assert sorted(named - set(get_commands())) == []


def test_the_readme_stays_a_front_door():
    assert len(README.splitlines()) <= 160
    assert "ARCHITECTURE.md" not in README


URL = re.compile(r"`(?:GET |POST )?(/[a-z][^`\s?]*)")


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", ROOT / "docs" / "user-guide.md"], ids=lambda p: p.name
)
def test_every_console_address_the_guide_names_is_served(doc):
    from django.urls import Resolver404, resolve

    addresses = sorted(set(URL.findall(doc.read_text(encoding="utf-8"))))
    assert addresses
    unserved = []
    for address in addresses:
        try:
            resolve(address)
        except Resolver404:
            unserved.append(address)
    assert unserved == []
