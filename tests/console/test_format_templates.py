"""A format's templates are its package's: the console's template loader serves the file
``<templates>/<path>`` of a registered format as ``formats/<name>/<path>`` and nothing else,
and the wheel ships them (pyproject's package data)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from django.template import TemplateDoesNotExist
from django.template.loader import get_template

from console.template_loaders import report_template
from core.formats import formats
from core.formats.contextos.adapter import ContextosFormat

ROOT = Path(__file__).resolve().parents[2]
CONTEXTOS = Path(ContextosFormat.__module__.replace(".", "/")).parent


def test_a_format_s_report_partial_is_served_from_its_package():
    fmt = formats().get("contextos-trace")
    assert report_template(fmt) == "formats/contextos-trace/report.html"
    template = get_template("formats/contextos-trace/report.html")
    assert template.origin.name == str(ROOT / CONTEXTOS / "templates" / "report.html")
    assert report_template(formats().get("verist-snapshot")) is None
    assert report_template(None) is None


@pytest.mark.parametrize(
    "name",
    [
        "formats/contextos-trace/../adapter.py",  # out of the format's directory
        "formats/contextos-trace//etc/passwd",
        "formats/contextos-trace/",
        "formats/no-such-format/report.html",
        "formats/verist-snapshot/report.html",  # a format without templates
        "contextos-trace/report.html",  # not under formats/
    ],
)
def test_nothing_else_is_served_by_a_format_s_name(name):
    with pytest.raises(TemplateDoesNotExist):
        get_template(name)


def test_every_declared_report_partial_exists_in_its_format_s_templates():
    declared = [fmt for fmt in formats() if fmt.report_template is not None]
    assert [fmt.name for fmt in declared] == ["contextos-trace"]
    for fmt in declared:
        assert fmt.templates is not None
        assert (Path(fmt.templates) / fmt.report_template).is_file()


def test_the_wheel_ships_every_built_in_format_s_templates():
    """Each file of a format's templates directory matches a package-data pattern of its
    package (setuptools ships nothing else that is not a module)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]
    for fmt in formats():
        if fmt.templates is None:
            continue
        package = Path(fmt.templates).parent
        dotted = ".".join(package.relative_to(ROOT).parts)
        patterns = package_data.get("*", []) + package_data.get(dotted, [])
        shipped = {p for pattern in patterns for p in package.glob(pattern) if p.is_file()}
        files = {p for p in Path(fmt.templates).rglob("*") if p.is_file()}
        assert files, fmt.name
        assert files <= shipped, (fmt.name, sorted(map(str, files - shipped)))
