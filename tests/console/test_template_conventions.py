"""Conventions every template keeps: progressive enhancement, no inline code, partials named
after the region they replace, htmx served locally."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.formats import formats

ROOT = Path(__file__).resolve().parents[2]
#: the console's templates and each built-in format's own, in its package
TEMPLATES = sorted((ROOT / "templates").rglob("*.html")) + sorted(
    path for fmt in formats() if fmt.templates for path in Path(fmt.templates).rglob("*.html")
)
SCRIPTS = sorted((ROOT / "static" / "js").glob("*.js"))


def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def tags(text: str) -> list[str]:
    return re.findall(r"<[a-zA-Z][^<>]*(?:\{[%{][^}]*[%}]\}[^<>]*)*>", text)


def test_there_are_templates_to_check():
    assert len(TEMPLATES) > 15
    assert any(p.parts[-3:] == ("contextos", "templates", "report.html") for p in TEMPLATES)
    assert {p.name for p in SCRIPTS} == {"upload.js", "sign.js", "copy.js"}


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_every_hx_get_also_works_as_a_link_or_a_get_form(path):
    for tag in tags(source(path)):
        target = re.search(r'\shx-get="([^"]+)"', tag)
        if not target:
            continue
        if tag.startswith("<a "):
            href = re.search(r'\shref="([^"]+)"', tag)
            assert href, tag
            same = href[1] == target[1]
            # a polling link may refresh the whole page while htmx fetches only the region
            assert same or 'hx-trigger="every' in tag, tag
        else:
            assert tag.startswith("<form "), tag
            assert re.search(r'\saction="([^"]+)"', tag)[1] == target[1], tag
            assert 'method="get"' in tag, tag


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_writes_are_real_forms(path):
    text = source(path)
    for verb in ("hx-post", "hx-put", "hx-patch", "hx-delete"):
        for tag in tags(text):
            if verb in tag:
                assert tag.startswith("<form "), tag
                assert 'method="post"' in tag, tag
    for form in re.findall(r"<form\b[^>]*method=\"post\"[^>]*>.*?</form>", text, re.S):
        assert "{% csrf_token %}" in form, form[:200]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_no_inline_script_style_or_handlers(path):
    text = source(path)
    for tag in re.findall(r"<script\b[^>]*>", text):
        assert 'src="' in tag, tag
        assert 'nonce="{{ csp_nonce }}"' in tag, tag
    assert not re.search(r"<script\b[^>]*>(?!</script>)", text)
    assert "<style" not in text
    assert not re.search(r"\sstyle\s*=", text)
    assert not re.search(r"\son[a-z]+\s*=", text)
    assert "javascript:" not in text
    assert "//cdn" not in text
    assert "https://" not in text


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_each_partial_is_named_after_the_region_it_replaces(path):
    text = source(path)
    for name in re.findall(r"\{% partialdef ([\w-]+)(?: inline)? %\}", text):
        body = text.split(f"{{% partialdef {name}", 1)[1]
        first_tag = re.search(r"<[a-z]+\b[^>]*>", body)[0]
        classes = re.search(r'class="([^"]*)"', first_tag)
        # a region that repeats on a page (one per diff side) is named by its class
        assert f'id="{name}"' in first_tag or (classes and name in classes[1].split()), (
            name,
            first_tag,
        )


def test_the_csrf_header_is_set_once_on_body_in_the_layout():
    layout = source(ROOT / "templates" / "console" / "base_layout.html")
    assert layout.count("hx-headers=") == 1
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"\{\{ csrf_token \}\}\"\}'", layout)
    assert "{% htmx_script %}" in layout
    assert '"includeIndicatorStyles": false' in layout  # htmx would inject a <style> otherwise


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_use_no_eval(path):
    text = source(path)
    assert "eval(" not in text
    assert "new Function" not in text
    assert "document.write" not in text


def test_the_signing_key_is_generated_non_extractable():
    text = source(ROOT / "static" / "js" / "sign.js")
    assert 'crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"])' in text
    assert "indexedDB.open" in text
    assert 'exportKey("raw", pair.publicKey)' in text
    assert "privateKey" not in text.split("registerForm.querySelector")[1].split("submit")[0]
