"""Each built-in adapter is a ``TraceFormat`` of its own parsed type: this module is checked
by mypy (``[tool.mypy] files``) and never imported. A format added to ``BUILTIN`` gets its
line here."""

from __future__ import annotations

from replay.formats.ahd.adapter import AhdFormat, AhdRun
from replay.formats.contextos.adapter import ContextosFormat, ContextosRun
from replay.formats.mace import Log
from replay.formats.mace.adapter import MaceFormat
from replay.formats.native import NativeTrace
from replay.formats.native.adapter import NativeFormat
from replay.formats.paxman import Artifact
from replay.formats.paxman.adapter import PaxmanFormat
from replay.formats.protocol import TraceFormat
from replay.formats.verist import VeristFile
from replay.formats.verist.adapter import VeristFormat

AHD: TraceFormat[AhdRun] = AhdFormat()
CONTEXTOS: TraceFormat[ContextosRun] = ContextosFormat()
NATIVE: TraceFormat[NativeTrace] = NativeFormat()
PAXMAN: TraceFormat[Artifact] = PaxmanFormat()
VERIST: TraceFormat[VeristFile] = VeristFormat()
MACE: TraceFormat[Log] = MaceFormat()
