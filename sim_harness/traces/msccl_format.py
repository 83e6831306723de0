"""An MSCCL XML algorithm as a trace: one ``msccl`` collective whose steps come from the file.

The header (``<algo ngpus nchunksperloop coll name proto ...>``) gives the node count and the
name; the whole file is parsed once by :func:`ace.sw.msccl.read_msccl` and instantiated at the
chosen size, so a bad file fails here with its ``file:line: <element> attribute 'x': problem``
message. S is one loop of the algorithm: ``nchunksperloop`` chunks, so it must be a multiple of
``nchunksperloop`` fp32 elements; the default is the largest such size up to 1 MiB. The
collective's ``extra`` keeps the XML's ``coll`` and ``proto`` (``Simple``, ``LL``, ``LL128``: GPU
memory protocols, which the engine has no use for).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ace.sw.msccl import MscclError, parse_msccl, read_msccl
from ace.sw.program import ProgramError

from ..trace import CollectiveSpec, Trace, TraceError
from ._common import DTYPE_BYTES, read_text

__all__ = ["MscclHeader", "read_msccl_header", "load_msccl_trace", "DEFAULT_MSCCL_BYTES",
           "folding_notes"]

DEFAULT_MSCCL_BYTES = 1 << 20


@dataclass(frozen=True)
class MscclHeader:
    """The ``<algo>`` attributes a trace needs; ``attrs`` has them all, verbatim."""
    name: str
    ngpus: int
    nchunksperloop: int
    coll: str
    line: int
    attrs: dict


def read_msccl_header(path: str | Path) -> MscclHeader:
    """Read the ``<algo>`` element of an MSCCL file (errors name file, line and attribute)."""
    path = Path(path)
    source = str(path)
    text = read_text(path)
    try:
        root = parse_msccl(text, source)
    except MscclError as error:
        raise TraceError(str(error)) from None
    if root.tag != "algo":
        raise TraceError(f"{source}:{root.line}: <{root.tag}>: the root element must be <algo>")
    values = {}
    for attr in ("ngpus", "nchunksperloop"):
        text_value = root.attrib.get(attr)
        if text_value is None:
            raise TraceError(f"{source}:{root.line}: <algo> attribute '{attr}': missing")
        try:
            values[attr] = int(text_value)
        except ValueError:
            values[attr] = 0
        if values[attr] < 1:
            raise TraceError(f"{source}:{root.line}: <algo> attribute '{attr}': {text_value!r} "
                             "is not allowed; allowed: an integer >= 1")
    return MscclHeader(name=root.attrib.get("name") or path.stem, ngpus=values["ngpus"],
                       nchunksperloop=values["nchunksperloop"],
                       coll=root.attrib.get("coll", "custom"), line=root.line,
                       attrs=dict(root.attrib))


def msccl_granule(header: MscclHeader, dtype: str = "fp32") -> int:
    """S must be a multiple of this many bytes: ``nchunksperloop`` elements."""
    return header.nchunksperloop * DTYPE_BYTES[dtype]


def load_msccl_trace(path: str | Path, *, msccl_bytes: int | None = None) -> Trace:
    """One ``msccl`` collective of ``msccl_bytes`` (default: the largest allowed size up to
    1 MiB), fp32."""
    path = Path(path)
    header = read_msccl_header(path)
    granule = msccl_granule(header)
    if msccl_bytes is None:
        nbytes = max(granule, DEFAULT_MSCCL_BYTES // granule * granule)
    else:
        nbytes = msccl_bytes
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 \
                or nbytes % granule:
            raise TraceError(f"{path}:{header.line}: msccl_bytes: {nbytes!r} is not allowed; "
                             f"allowed: a positive multiple of {granule} bytes "
                             f"(nchunksperloop = {header.nchunksperloop} fp32 elements)")
    try:
        algorithm = read_msccl(path)
        algorithm.program(count=nbytes // DTYPE_BYTES["fp32"], dtype="fp32")
    except ProgramError as error:
        text = str(error)
        raise TraceError(text if text.startswith(str(path)) else f"{path}: {text}") from None
    spec = CollectiveSpec(name=header.name, collective="msccl", bytes=nbytes, dtype="fp32",
                          algorithm="msccl", msccl_xml=str(path),
                          source=f"{path}:{header.line}",
                          extra={"coll": header.coll, "proto": algorithm.proto,
                                 "thread_blocks": algorithm.thread_blocks})
    return Trace(path=str(path), format="msccl", collectives=[spec], nodes=header.ngpus,
                 meta={"algo": header.attrs})


def folding_notes(trace: Trace, num_channels: int) -> list[str]:
    """One line per MSCCL algorithm of ``trace`` whose threadblocks share channels on an
    engine of ``num_channels`` channels (``docs/traces.md``, Folding)."""
    notes = []
    for xml in dict.fromkeys(s.msccl_xml for s in trace.collectives if s.msccl_xml):
        folding = read_msccl(xml).folding(num_channels)
        if folding.folded:
            notes.append(f"{xml}: {folding.describe()}")
    return notes
