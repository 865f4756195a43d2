"""Each trace format's own templates, from its package: a Django template loader.

A format declares the directory of its templates (``TraceFormat.templates``, a directory in
its package, built-in or installed through the ``replay_console.formats`` entry points); this
loader serves a file ``<templates>/<path>`` of the registered format ``<name>`` as the
template ``formats/<name>/<path>``, and nothing else: a format's partial never shadows a
console template, and no path leaves the format's directory. ``config.settings`` lists it
after the project's and the apps' loaders.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.template import Origin
from django.template.loaders.filesystem import Loader as FilesystemLoader
from django.utils._os import safe_join

from core.formats import formats
from core.formats.protocol import TraceFormat

PREFIX = "formats/"


def format_template(fmt: TraceFormat[object], path: str) -> str:
    """The name a file of ``fmt``'s templates directory is included by."""
    return f"{PREFIX}{fmt.name}/{path}"


def report_template(fmt: TraceFormat[object] | None) -> str | None:
    """The template of ``fmt``'s own part of a run's report page, or None."""
    if fmt is None or fmt.templates is None or fmt.report_template is None:
        return None
    return format_template(fmt, fmt.report_template)


def page_template(fmt: TraceFormat[object] | None) -> str | None:
    """The template of ``fmt``'s own section of a trace page (``page_template``), or None."""
    name = getattr(fmt, "page_template", None)
    if fmt is None or fmt.templates is None or name is None:
        return None
    return format_template(fmt, name)


class FormatTemplates(FilesystemLoader):
    """``formats/<name>/<path>``: the file ``path`` of the registered format ``name``'s
    templates directory."""

    def get_dirs(self) -> list[str | Path]:
        # what the development server's autoreloader watches
        return [fmt.templates for fmt in formats() if fmt.templates is not None]

    def get_template_sources(self, template_name: str) -> Iterator[Origin]:
        if not template_name.startswith(PREFIX):
            return
        name, _, path = template_name[len(PREFIX) :].partition("/")
        fmt = formats().get(name)
        if fmt is None or fmt.templates is None or not path:
            return
        try:
            found = safe_join(fmt.templates, path)
        except SuspiciousFileOperation:
            return  # a path out of the format's directory names nothing
        yield Origin(name=found, template_name=template_name, loader=self)
