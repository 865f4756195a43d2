"""Each built-in adapter is a ``TraceFormat`` of its own parsed type: this module is checked
by mypy (``[tool.mypy] files``) and never imported. A format added to ``BUILTIN`` gets its
line here."""

from __future__ import annotations

from core.formats.ahd.adapter import AhdFormat, AhdRun
from core.formats.contextos.adapter import ContextosFormat, ContextosRun
from core.formats.mace import Log
from core.formats.mace.adapter import MaceFormat
from core.formats.native import NativeTrace
from core.formats.native.adapter import NativeFormat
from core.formats.otel.adapter import OtelFormat
from core.formats.otel.record import Record
from core.formats.paxman import Artifact
from core.formats.paxman.adapter import PaxmanFormat
from core.formats.protocol import TraceFormat
from core.formats.verist import VeristFile
from core.formats.verist.adapter import VeristFormat

AHD: TraceFormat[AhdRun] = AhdFormat()
CONTEXTOS: TraceFormat[ContextosRun] = ContextosFormat()
OTEL: TraceFormat[Record] = OtelFormat()
NATIVE: TraceFormat[NativeTrace] = NativeFormat()
PAXMAN: TraceFormat[Artifact] = PaxmanFormat()
VERIST: TraceFormat[VeristFile] = VeristFormat()
MACE: TraceFormat[Log] = MaceFormat()
