"""MSCCL XML algorithms -> :class:`~ace.sw.program.CollectiveProgram`.

Format (MSCCL runtime / msccl-tools, the ``old_format`` XML that the runtime reads)::

    <algo name proto nchannels nchunksperloop ngpus coll inplace [outofplace minBytes maxBytes
          redop]>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>

* ``type``: s, r, rrc, rrs, rrcs, rcs, cpy, re, nop (same meaning as ACE steps; ``rrc`` keeps
  ``recv (+) src`` in ``dst``, ``re`` is ``dst = dst (+) src``);
* buffers ``i``/``o``/``s`` (also ``input``/``output``/``scratch``); offsets and counts are in
  chunks of ``chunk_elems`` elements; the side a step does not use may say ``-1``;
* ``depid``/``deps``: the step waits until step ``deps`` of threadblock ``depid`` (same gpu) is
  done; several dependencies may be given as comma-separated lists of equal length. ACE has one
  dependency per instruction, so each extra dependency becomes a ``nop`` step before the step;
* ``inplace="1"`` with ``o_chunks="0"``: the output is the input buffer (``o`` aliases ``i``);
* ``proto`` (``Simple``, ``LL``, ``LL128``) is how a GPU formats its memory traffic; the engine
  moves packets of its own, so the protocol is kept (:attr:`MscclAlgorithm.attrs`) but changes
  nothing. ``outofplace``, ``minBytes``, ``maxBytes`` and ``redop`` are kept verbatim too.

The file is parsed once into an :class:`MscclAlgorithm` (:func:`read_msccl`, cached per file);
:meth:`MscclAlgorithm.program` instantiates it for a size, a number of passes and a mode, and
:meth:`MscclAlgorithm.fit` picks the passes an engine needs.

**Channels and folding.** The NIC delivers channel c's packets to channel c, so a sending
threadblock and its receiving threadblock (same ``chan``, matching ``send``/``recv``) must run on
the same channel index: connected threadblocks form groups (union-find), and each group gets one
channel. With more groups than the engine's ``num_channels`` sequencers, several threadblocks
share (are *folded onto*) one channel, which runs their steps interleaved. The interleaving is
the order of one valid global execution of the whole algorithm (:func:`_schedule`): every step
after its dependencies, every receive after its send, and the messages of one
(sender, receiver, channel) received in the order they were sent, which is what the NIC's
per-channel FIFOs deliver. The schedule keeps at most two unreceived messages per FIFO whenever
the algorithm allows it (k when it needs k, :attr:`Folding.in_flight`), and
:meth:`MscclAlgorithm.fit` makes messages small enough that that many fit one receive buffer,
so a send never waits for room that only a later step could free: by induction over the
schedule, every step of the folded program completes on the hardware. :class:`Folding` says
how many threadblocks shared a channel.

Loops: as the MSCCL runtime does, a buffer larger than one pass of the algorithm is processed in
``loops`` passes; pass k covers elements ``[k*L, (k+1)*L)`` of every buffer (L = the buffer's
chunks x ``chunk_elems``), and its steps follow pass k-1's on every channel. In ``ace`` mode each
pass loads its slice into the same SRAM region and stores its result, so one pass must fit the
SRAM and the SRAM's size, not the buffer's, bounds the collective.

**Loads and stores** (``ace`` mode). The importer adds the loads of each pass's input and the
stores of its output, overlapped with the communication: the input is cut into at most 32
runs of consecutive chunks, each loaded by one ``load``, and the output likewise, each stored by
one ``store``. The schedule's global order places them: a load just before the first step that
touches its chunks, on that step's channel, and a store just after the last step that writes
its chunks, on that step's channel (an in-place output chunk that nothing writes is stored
after its load). Any other step that touches a loaded run waits for its load, and a store
waits for the last writer of its chunks on every other channel. That order is one valid
execution of the whole program, so the deadlock argument above still holds. Passes share the
SRAM, so none overlaps the next: channel 0's pass starts with a ``nop`` marker that every other
channel's first step waits for, and ends with ``nop``\\ s that wait for every other channel's
last step. In the baselines (``staged``, ``p2p``) buffers are placed in memory and no load or
store is added.

Errors (:class:`MscclError`) name the file, the line and the attribute.
"""

from __future__ import annotations

import functools
import xml.parsers.expat
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ace.config import AceConfig
from ace.layouts import DTYPE_BYTES
from ace.sw.program import (Channel, CollectiveProgram, NodeProgram, ProgramError, Step, Topology,
                            dtype_from_name, op_from_name)
from ace.vocab import Buffer, Collective, Mode, StepType, parse_collective

__all__ = ["MscclError", "MscclAlgorithm", "Folding", "read_msccl", "load_msccl", "parse_msccl",
           "PROTOCOLS"]

#: Values of ``<algo proto>``: GPU memory protocols, kept but meaningless to the engine.
PROTOCOLS = ("Simple", "LL", "LL128")
#: The most unreceived messages the schedule keeps per (sender, receiver, channel) FIFO.
_FIFO_DEPTH = 2
#: Loads (and stores) per pass in ``ace`` mode: finer runs let the first steps start sooner.
#: On full8's engine, ring LL at 1 MiB: 8 runs 192,573 cycles, 16 124,067, 32 108,261, 64
#: 107,285; all-pairs 4 ch: 8 runs 186,049, 32 138,637 (docs/traces.md).
_LOAD_RUNS = 32


class MscclError(ProgramError):
    """A malformed MSCCL file: ``file:line: <element> attribute 'name': problem``."""


@dataclass
class _Element:
    tag: str
    attrib: dict
    line: int
    children: list = field(default_factory=list)


def parse_msccl(text: str, source: str = "<xml>") -> _Element:
    """Parse XML text into elements that remember their line numbers."""
    root_holder: list[_Element] = []
    stack: list[_Element] = []
    parser = xml.parsers.expat.ParserCreate()

    def start(tag, attrib):
        element = _Element(tag, dict(attrib), parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(element)
        else:
            root_holder.append(element)
        stack.append(element)

    def end(tag):
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as error:
        raise MscclError(f"{source}:{error.lineno}: not well-formed XML: "
                         f"{xml.parsers.expat.ErrorString(error.code)}") from None
    return root_holder[0]


# -- the model ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MscclStep:
    """One ``<step>``: ``src``/``dst`` are ``(buffer, chunk offset)`` (``o`` already resolved
    to ``i`` when the output aliases the input); ``deps`` are ``(threadblock, step)`` pairs of
    the same gpu."""
    type: str
    cnt: int
    src: tuple[str, int] | None
    dst: tuple[str, int] | None
    deps: tuple[tuple[int, int], ...]
    line: int

    @property
    def sends(self) -> bool:
        return "send" in _USES[self.type]

    @property
    def receives(self) -> bool:
        return "recv" in _USES[self.type]


@dataclass(frozen=True)
class ThreadBlock:
    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[MscclStep, ...]
    line: int


@dataclass(frozen=True)
class MscclGpu:
    id: int
    chunks: dict                    # "i" / "o" / "s" -> chunks of one pass
    alias_o: bool                   # the output is the input buffer
    tbs: dict                       # threadblock id -> ThreadBlock


@dataclass(frozen=True)
class Folding:
    """How an algorithm's threadblocks map onto ``channels`` hardware channels.

    thread_blocks : the most threadblocks of one gpu.
    channels : hardware channels the program uses (at most the engine's ``num_channels``).
    shared : the most threadblocks that run on one channel of one gpu (1: no folding).
    channel_of : ``(gpu, tb) -> channel``.
    sequence : ``(gpu, channel) -> [(tb, step), ...]``: the channel's steps, in the order of
        one valid global execution.
    in_flight, in_flight_chunks : the most messages, and chunks, that execution has sent and
        not yet received on one (sender, receiver, channel) FIFO: the receive buffer must hold
        that much (module docstring).
    rank : ``(gpu, tb, step) -> n``: the step is the n-th of that execution (all gpus).
    """
    thread_blocks: int
    channels: int
    shared: int
    in_flight: int
    in_flight_chunks: int
    channel_of: dict = field(compare=False, repr=False)
    sequence: dict = field(compare=False, repr=False)
    rank: dict = field(compare=False, repr=False)

    @property
    def folded(self) -> bool:
        return self.shared > 1

    def describe(self) -> str:
        text = (f"{self.thread_blocks} thread block{'s' if self.thread_blocks != 1 else ''} "
                f"per GPU on {self.channels} channel{'s' if self.channels != 1 else ''}")
        if self.folded:
            text += f": up to {self.shared} thread blocks share a channel (folded)"
        return text

    def to_dict(self) -> dict:
        return {"thread_blocks": self.thread_blocks, "channels": self.channels,
                "shared": self.shared}


@dataclass(frozen=True, eq=False)
class MscclAlgorithm:
    """A parsed MSCCL algorithm. ``attrs`` holds every ``<algo>`` attribute verbatim."""
    name: str
    source: str
    line: int
    ngpus: int
    nchunksperloop: int
    coll: str
    proto: str
    attrs: dict = field(compare=False)
    gpus: tuple[MscclGpu, ...] = field(compare=False)
    _foldings: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def thread_blocks(self) -> int:
        return max((len(g.tbs) for g in self.gpus), default=0)

    def folding(self, num_channels: int | None = None) -> Folding:
        """Threadblocks on at most ``num_channels`` channels (None: as many as needed, one
        threadblock per channel where the send/receive pairing allows); computed once."""
        if num_channels is not None and (isinstance(num_channels, bool) or not isinstance(
                num_channels, int) or num_channels < 1):
            raise MscclError(f"{self.source}: num_channels {num_channels!r}; allowed: an "
                             "integer >= 1, or None")
        if num_channels not in self._foldings:
            self._foldings[num_channels] = _fold(self, num_channels)
        return self._foldings[num_channels]

    def program(self, *, chunk_elems: int | None = None, count: int | None = None,
                loops: int = 1, dtype="int32", op="sum", mode: str = "ace", topology=None,
                num_channels: int | None = None, input_addr: int = 0,
                output_addr: int | None = None, scratch_addr: int | None = None,
                folding: Folding | None = None) -> CollectiveProgram:
        """The program of ``loops`` passes of ``chunk_elems`` elements per chunk (or of
        ``count`` elements in all, which must divide into ``loops x nchunksperloop`` chunks),
        on ``num_channels`` channels (see :meth:`folding`; ``folding`` overrides it).
        ``topology`` (default ``switch:ngpus``) gives the link of every peer."""
        if not isinstance(loops, int) or isinstance(loops, bool) or loops < 1:
            raise MscclError(f"{self.source}: loops {loops!r}; allowed: an integer >= 1")
        if chunk_elems is None:
            if count is None:
                raise MscclError(f"{self.source}: give chunk_elems= or count=")
            if count % (self.nchunksperloop * loops):
                raise MscclError(f"{self.source}: count {count} is not a multiple of "
                                 f"nchunksperloop x loops = {self.nchunksperloop} x {loops}")
            chunk_elems = count // (self.nchunksperloop * loops)
        if chunk_elems < 1:
            raise MscclError(f"{self.source}: chunk_elems {chunk_elems}; allowed: at least 1")
        mode = Mode.parse(mode, MscclError).value
        topology = self._topology(topology)
        layout = _Layout(chunk_elems, dtype_from_name(dtype), op_from_name(op), mode, loops,
                         input_addr, output_addr, scratch_addr)
        folding = folding or self.folding(num_channels)
        nodes = [_lower_gpu(gpu, folding, topology, layout) for gpu in self.gpus]
        width = max(len(n.channels) for n in nodes)
        for node, gpu in zip(nodes, self.gpus):
            node.channels += [Channel() for _ in range(width - len(node.channels))]
            if loops > 1:
                _repeat(node, gpu, layout)
        count_elems = nodes[0].in_elems if self.coll != "allgather" else nodes[0].out_elems
        program = CollectiveProgram(collective=self.coll, algorithm=f"msccl:{self.name}",
                                    dtype=layout.dtype, op=layout.op, count=count_elems,
                                    nodes=nodes, topology=topology, mode=mode, chunks=1)
        program.validate()
        return program

    def fit(self, count: int, config: AceConfig, *, dtype="fp32", op="sum", mode: str = "ace",
            topology=None) -> CollectiveProgram:
        """The program of ``count`` elements on ``config``'s engine, folded onto its
        ``num_channels``, in the fewest passes (loops) for which :meth:`pass_problem` finds
        nothing."""
        per_loop, reason = self.nchunksperloop, None
        for loops in (d for d in range(1, count // per_loop + 1) if count % (d * per_loop) == 0):
            reason = self.pass_problem(count // (per_loop * loops), loops, config, dtype, mode)
            if reason is None:
                return self.program(count=count, loops=loops, dtype=dtype, op=op, mode=mode,
                                    topology=topology, num_channels=config.num_channels)
        raise MscclError(f"{self.source}: {count} elements: "
                         f"{reason or f'not a multiple of nchunksperloop = {per_loop}'}")

    def pass_problem(self, chunk_elems: int, loops: int, config: AceConfig, dtype="fp32",
                     mode: str = "ace") -> str | None:
        """Why chunks of ``chunk_elems`` in ``loops`` passes do not suit ``config``'s engine,
        or None: every message within ``packet_bytes``, what the folded schedule keeps in
        flight on one FIFO within one receive buffer (the deadlock rule, ``docs/engine.md``),
        chunks of whole SRAM words, each channel's steps within ``program_words`` and, in
        ``ace`` mode, one pass's buffers within the SRAM."""
        folding = self.folding(config.num_channels)
        chunk = chunk_elems * DTYPE_BYTES[dtype_from_name(dtype)]
        rx_bytes = config.rx_channel_beats * config.link_bytes
        largest = max((st.cnt for g in self.gpus for tb in g.tbs.values() for st in tb.steps
                       if st.sends), default=0)
        if largest * chunk > config.packet_bytes:
            return f"{largest * chunk}-byte messages exceed packet_bytes = {config.packet_bytes}"
        if folding.in_flight_chunks * chunk > rx_bytes:
            return (f"{folding.in_flight_chunks * chunk} bytes in flight on one channel exceed "
                    f"its {rx_bytes}-byte receive buffer")
        if chunk % config.link_bytes and self.nchunksperloop > 1:
            return f"{chunk}-byte chunks are not whole {config.link_bytes}-byte SRAM words"
        one_pass = self.program(chunk_elems=1, mode=mode, num_channels=config.num_channels)
        steps = max(len(ch.steps) for node in one_pass.nodes for ch in node.channels)
        if loops * steps + 1 > config.program_words:
            return (f"{loops} passes of {steps} steps (and end) exceed program_words = "
                    f"{config.program_words}")
        if mode == Mode.ACE:
            return _sram_problem(self, chunk, config)
        return None

    def _topology(self, topology) -> Topology:
        if isinstance(topology, str):
            topology = Topology.parse(topology)
        topology = topology or Topology.switch(self.ngpus)
        if topology.num_nodes != self.ngpus:
            raise MscclError(f"{self.source}: topology {topology} has {topology.num_nodes} "
                             f"nodes; the algorithm has ngpus = {self.ngpus}")
        return topology


# -- reading --------------------------------------------------------------------------------------

#: Buffer names of the XML: the letters and the words (``input``...).
_BUFS = {**{b.value: b.value for b in Buffer}, **{b.name.lower(): b.value for b in Buffer}}
#: The step types an MSCCL file may use: every step of the vocabulary but the engine's own.
_STEP_TYPES = tuple(t.value for t in StepType
                    if t not in (StepType.LOAD, StepType.STORE, StepType.END))
_USES = {t: StepType(t).operands for t in _STEP_TYPES}


def _collective(rd: "_Reader", root: "_Element") -> str:
    """``coll``: a collective of the vocabulary (or an alias), or ``custom``."""
    text = root.attrib.get("coll", "custom").lower()
    if text == "custom":
        return text
    try:
        return parse_collective(text, MscclError).value
    except MscclError:
        raise rd.err(root, "coll", f"{text!r}; allowed: {', '.join(Collective)}, custom "
                     "(or an alias such as reducescatter)") from None


class _Reader:
    def __init__(self, source):
        self.source = source

    def err(self, element: _Element, attr: str | None, problem: str) -> MscclError:
        where = f"{self.source}:{element.line}: <{element.tag}>"
        if attr is not None:
            where += f" attribute '{attr}'"
        return MscclError(f"{where}: {problem}")

    def int_attr(self, element, name, *, default=None, low=None, high=None) -> int:
        if name not in element.attrib:
            if default is not None:
                return default
            raise self.err(element, name, "missing")
        text = element.attrib[name]
        try:
            value = int(text)
        except ValueError:
            raise self.err(element, name, f"{text!r} is not an integer") from None
        if (low is not None and value < low) or (high is not None and value > high):
            allowed = (f"{low if low is not None else '-inf'} to "
                       f"{high if high is not None else 'inf'}")
            raise self.err(element, name, f"{value} is out of range; allowed: {allowed}")
        return value

    def int_list(self, element, name) -> list[int]:
        text = element.attrib.get(name, "-1")
        try:
            return [int(v) for v in text.split(",")]
        except ValueError:
            raise self.err(element, name, f"{text!r} is not an integer or a comma-separated "
                           "list of integers") from None

    def children(self, element, tag) -> list[_Element]:
        for child in element.children:
            if child.tag != tag:
                raise self.err(child, None, f"expected <{tag}> inside <{element.tag}>")
        return element.children


def read_msccl(path_or_text, source: str | None = None) -> MscclAlgorithm:
    """Parse an MSCCL XML algorithm (a path, or the XML text itself) once; a file is cached
    until it changes."""
    if isinstance(path_or_text, Path) or (isinstance(path_or_text, str)
                                           and not path_or_text.lstrip().startswith("<")):
        path = Path(path_or_text)
        try:
            stat = path.stat()
        except OSError as error:
            raise MscclError(f"{path}: cannot read: {error.strerror}") from None
        return _read_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size,
                          source or str(path))
    return _read_text(path_or_text, source or "<xml>")


@functools.lru_cache(maxsize=32)
def _read_file(path: str, mtime_ns: int, size: int, source: str) -> MscclAlgorithm:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise MscclError(f"{source}: cannot read: {error.strerror}") from None
    return _read_text(text, source)


def _read_text(text: str, source: str) -> MscclAlgorithm:
    rd = _Reader(source)
    root = parse_msccl(text, source)
    if root.tag != "algo":
        raise rd.err(root, None, "the root element must be <algo>")
    ngpus = rd.int_attr(root, "ngpus", low=1, high=256)
    nchunks = rd.int_attr(root, "nchunksperloop", low=1)
    rd.int_attr(root, "nchannels", default=1, low=1)
    inplace = rd.int_attr(root, "inplace", default=0, low=0, high=1)
    rd.int_attr(root, "outofplace", default=0, low=0, high=1)
    for name in ("minBytes", "maxBytes"):
        rd.int_attr(root, name, default=0, low=0)
    coll = _collective(rd, root)
    proto = root.attrib.get("proto", "Simple")
    if proto.lower() not in {p.lower() for p in PROTOCOLS}:
        raise rd.err(root, "proto", f"{proto!r}; allowed: {', '.join(PROTOCOLS)}")
    gpus: dict[int, MscclGpu] = {}
    for gpu_el in rd.children(root, "gpu"):
        gpu = _read_gpu(rd, gpu_el, ngpus, bool(inplace))
        if gpu.id in gpus:
            raise rd.err(gpu_el, "id", f"gpu {gpu.id} is defined twice")
        gpus[gpu.id] = gpu
    for g in range(ngpus):
        if g not in gpus:
            raise rd.err(root, "ngpus", f"{ngpus} gpus declared but gpu {g} is missing")
    algorithm = MscclAlgorithm(name=root.attrib.get("name") or "unnamed", source=source,
                               line=root.line, ngpus=ngpus, nchunksperloop=nchunks,
                               coll=coll, proto=proto, attrs=dict(root.attrib),
                               gpus=tuple(gpus[g] for g in range(ngpus)))
    _partners(algorithm, rd)                    # every send has its receiving threadblock
    return algorithm


def _read_gpu(rd: _Reader, gpu_el: _Element, ngpus: int, inplace: bool) -> MscclGpu:
    g = rd.int_attr(gpu_el, "id", low=0, high=ngpus - 1)
    chunks = {"i": rd.int_attr(gpu_el, "i_chunks", default=0, low=0),
              "o": rd.int_attr(gpu_el, "o_chunks", default=0, low=0),
              "s": rd.int_attr(gpu_el, "s_chunks", default=0, low=0)}
    alias_o = inplace and chunks["o"] == 0
    tbs: dict[int, ThreadBlock] = {}
    for tb_el in rd.children(gpu_el, "tb"):
        t = rd.int_attr(tb_el, "id", low=0)
        if t in tbs:
            raise rd.err(tb_el, "id", f"threadblock {t} is defined twice on gpu {g}")
        send = rd.int_attr(tb_el, "send", default=-1, low=-1, high=ngpus - 1)
        recv = rd.int_attr(tb_el, "recv", default=-1, low=-1, high=ngpus - 1)
        chan = rd.int_attr(tb_el, "chan", default=0, low=0)
        for name, peer in (("send", send), ("recv", recv)):
            if peer == g:
                raise rd.err(tb_el, name, f"peer {peer} is the gpu itself")
        steps = tuple(_read_step(rd, st, k, g, t, send, recv, chunks, alias_o)
                      for k, st in enumerate(rd.children(tb_el, "step")))
        tbs[t] = ThreadBlock(t, send, recv, chan, steps, tb_el.line)
    gpu = MscclGpu(g, chunks, alias_o, tbs)
    _check_deps(rd, gpu, gpu_el)
    return gpu


def _read_step(rd: _Reader, st: _Element, k: int, g: int, t: int, send: int, recv: int,
               chunks: dict, alias_o: bool) -> MscclStep:
    s_index = rd.int_attr(st, "s", low=0)
    if s_index != k:
        raise rd.err(st, "s", f"{s_index}; steps must be numbered 0, 1, ... in order "
                     f"(expected {k})")
    typ = st.attrib.get("type")
    if typ not in _STEP_TYPES:
        raise rd.err(st, "type", f"{typ!r} is not a step type; allowed: {', '.join(_STEP_TYPES)}")
    uses = _USES[typ]
    cnt = rd.int_attr(st, "cnt", default=0 if typ == "nop" else None, low=0)
    if typ != "nop" and cnt < 1:
        raise rd.err(st, "cnt", f"{cnt}; allowed: at least 1")
    slices = {}
    for side in ("src", "dst"):
        if side not in uses:
            continue
        buf_text = st.attrib.get(f"{side}buf")
        if buf_text not in _BUFS:
            raise rd.err(st, f"{side}buf", f"{buf_text!r}; allowed: {', '.join(_BUFS)}")
        buf = _BUFS[buf_text]
        off = rd.int_attr(st, f"{side}off", low=0)
        if buf == "o" and alias_o:
            buf = "i"
        if off + cnt > chunks[buf]:
            raise rd.err(st, f"{side}off", f"chunks {off}..{off + cnt - 1} of buffer "
                         f"{_BUFS[buf_text]} are out of range; gpu {g} has {chunks[buf]} "
                         f"{_BUFS[buf_text]}-chunks")
        slices[side] = (buf, off)
    for side, peer in (("send", send), ("recv", recv)):
        if side in uses and peer < 0:
            raise rd.err(st, "type", f"{typ} {'sends' if side == 'send' else 'receives'} but "
                         f"threadblock {t} has no {side} peer")
    depids, depsteps = rd.int_list(st, "depid"), rd.int_list(st, "deps")
    if len(depids) != len(depsteps):
        raise rd.err(st, "deps", f"{len(depsteps)} entries for {len(depids)} in depid")
    deps = []
    for d_tb, d_step in zip(depids, depsteps):
        if d_tb < 0:
            continue
        if d_step < 0:
            raise rd.err(st, "deps", f"{d_step}: a dependency on threadblock {d_tb} needs a "
                         "step index >= 0")
        deps.append((d_tb, d_step))
    rd.int_attr(st, "hasdep", default=0, low=0, high=1)
    return MscclStep(typ, cnt, slices.get("src"), slices.get("dst"), tuple(deps), st.line)


def _check_deps(rd: _Reader, gpu: MscclGpu, gpu_el: _Element) -> None:
    """Dependencies name existing steps of the same gpu, and none waits on its own future."""
    for t, tb in gpu.tbs.items():
        for k, step in enumerate(tb.steps):
            where = _Element("step", {}, step.line)
            for d_tb, d_step in step.deps:
                if d_tb not in gpu.tbs:
                    raise rd.err(where, "depid", f"threadblock {d_tb} does not exist on gpu "
                                 f"{gpu.id}")
                if d_step >= len(gpu.tbs[d_tb].steps):
                    raise rd.err(where, "deps", f"threadblock {d_tb} on gpu {gpu.id} has no "
                                 f"step {d_step}")
                if d_tb == t and d_step >= k:
                    raise rd.err(where, "deps", f"step {k} of threadblock {t} waits on its "
                                 f"own step {d_step}, which comes after it")


def _partners(algorithm: MscclAlgorithm, rd: _Reader) -> dict:
    """``(gpu, tb) -> (peer gpu, peer tb)``: the threadblock that receives what ``tb`` sends
    (same ``chan``, ``recv`` naming the sender)."""
    partner = {}
    for gpu in algorithm.gpus:
        for t, tb in gpu.tbs.items():
            if tb.send < 0:
                continue
            peer = algorithm.gpus[tb.send]
            match = [u for u, other in peer.tbs.items()
                     if other.recv == gpu.id and other.chan == tb.chan]
            where = _Element("tb", {}, tb.line)
            if not match:
                raise rd.err(where, "send", f"gpu {gpu.id} threadblock {t} sends to gpu "
                             f"{tb.send} on chan {tb.chan}, but no threadblock there receives "
                             f"from gpu {gpu.id} on chan {tb.chan}")
            if len(match) > 1:
                raise rd.err(where, "send", f"several threadblocks of gpu {tb.send} receive "
                             f"from gpu {gpu.id} on chan {tb.chan}")
            partner[(gpu.id, t)] = (tb.send, match[0])
    return partner


def load_msccl(path_or_text, *, chunk_elems: int | None = None, count: int | None = None,
               loops: int = 1, dtype="int32", op="sum", mode: str = "ace", topology=None,
               num_channels: int | None = None, input_addr: int = 0,
               output_addr: int | None = None, scratch_addr: int | None = None,
               source: str | None = None) -> CollectiveProgram:
    """Read an MSCCL XML algorithm (a path, or the XML text itself) into a program: shorthand
    for ``read_msccl(...).program(...)``."""
    return read_msccl(path_or_text, source).program(
        chunk_elems=chunk_elems, count=count, loops=loops, dtype=dtype, op=op, mode=mode,
        topology=topology, num_channels=num_channels, input_addr=input_addr,
        output_addr=output_addr, scratch_addr=scratch_addr)


# -- channels: groups, folding and the schedule ---------------------------------------------------

def _groups(algorithm: MscclAlgorithm) -> list[list[tuple[int, int]]]:
    """Threadblocks linked by send/receive pairs (each group needs one channel index), in the
    order of their first member."""
    partner = _partners(algorithm, _Reader(algorithm.source))
    parent = {(g.id, t): (g.id, t) for g in algorithm.gpus for t in g.tbs}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in partner.items():
        parent[find(a)] = find(b)
    groups: dict = {}
    for key in sorted(parent):
        groups.setdefault(find(key), []).append(key)
    return sorted(groups.values(), key=min)


def _fold(algorithm: MscclAlgorithm, num_channels: int | None) -> Folding:
    """Each group on the channel where its gpus have the fewest threadblocks so far (the most
    loaded of them, then their sum, then the lowest index); without a limit, on the lowest
    channel free on all its gpus."""
    load: dict[tuple[int, int], int] = {}
    channel_of = {}
    for members in _groups(algorithm):
        gpus = [g for g, _ in members]
        if num_channels is None:
            h = 0
            while any(load.get((g, h)) for g in gpus):
                h += 1
        else:
            h = min(range(num_channels),
                    key=lambda c: (max(load.get((g, c), 0) for g in gpus),
                                   sum(load.get((g, c), 0) for g in gpus), c))
        for g, t in members:
            channel_of[(g, t)] = h
            load[(g, h)] = load.get((g, h), 0) + 1
    sequence, rank, in_flight, chunks = _schedule(algorithm, channel_of)
    return Folding(thread_blocks=algorithm.thread_blocks,
                   channels=max(channel_of.values(), default=0) + 1,
                   shared=max(load.values(), default=1), in_flight=in_flight,
                   in_flight_chunks=chunks, channel_of=channel_of, sequence=sequence,
                   rank=rank)


def _schedule(algorithm: MscclAlgorithm, channel_of: dict) -> tuple[dict, dict, int, int]:
    """One valid global execution of the algorithm with its threadblocks on ``channel_of``'s
    channels, split into each channel's sequence ``(gpu, channel) -> [(tb, step)]``, each
    step's position in it ``(gpu, tb, step) -> n``, and the most messages and chunks in flight
    on one FIFO.

    In rounds: every threadblock whose next step can run at the start of a round runs it (in
    threadblock order), re-checked when its turn comes. A step can run when its dependencies are
    done, a receive when its message heads its (sender, receiver, channel) FIFO, and a send
    when that FIFO holds fewer than two messages; only when nothing else can run may a send
    go beyond that, one message at a time. An algorithm that cannot finish even so deadlocks
    by itself (an error)."""
    partner = _partners(algorithm, _Reader(algorithm.source))
    tbs = {(g.id, t): tb for g in algorithm.gpus for t, tb in g.tbs.items()}
    pos = dict.fromkeys(tbs, 0)
    fifos: dict[tuple[int, int, int], deque] = {}
    sequence: dict[tuple[int, int], list] = {}
    rank: dict[tuple[int, int, int], int] = {}
    remaining = sum(len(tb.steps) for tb in tbs.values())
    in_flight = chunks = 0

    def ready(key, depth) -> bool:
        g, t = key
        tb = tbs[key]
        if pos[key] >= len(tb.steps):
            return False
        step = tb.steps[pos[key]]
        if any(pos[(g, d_tb)] <= d_step for d_tb, d_step in step.deps):
            return False
        h = channel_of[key]
        if step.receives:
            queue = fifos.get((tb.recv, g, h))
            if not queue or queue[0][0] != key:
                return False
        return not step.sends or len(fifos.get((g, tb.send, h), ())) < depth

    while remaining:
        depth = _FIFO_DEPTH
        candidates = [key for key in tbs if ready(key, depth)]
        while not candidates and depth <= remaining + _FIFO_DEPTH:
            depth += 1
            candidates = [key for key in tbs if ready(key, depth)]
        if not candidates:
            raise MscclError(f"{algorithm.source}: the algorithm deadlocks: "
                             + "; ".join(_blocked(tbs, pos)))
        for key in candidates:
            if not ready(key, depth):
                continue
            g, t = key
            tb, h = tbs[key], channel_of[key]
            step = tb.steps[pos[key]]
            if step.receives:
                fifos[(tb.recv, g, h)].popleft()
            if step.sends:
                queue = fifos.setdefault((g, tb.send, h), deque())
                queue.append((partner[key], step.cnt))
                in_flight = max(in_flight, len(queue))
                chunks = max(chunks, sum(cnt for _, cnt in queue))
            sequence.setdefault((g, h), []).append((t, pos[key]))
            rank[(g, t, pos[key])] = len(rank)
            pos[key] += 1
            remaining -= 1
    return sequence, rank, in_flight, chunks


def _blocked(tbs: dict, pos: dict) -> list[str]:
    return [f"gpu {g} threadblock {t} step {pos[(g, t)]} ({tb.steps[pos[(g, t)]].type}, line "
            f"{tb.steps[pos[(g, t)]].line})" for (g, t), tb in tbs.items()
            if pos[(g, t)] < len(tb.steps)][:8]


def _sram_problem(algorithm: MscclAlgorithm, chunk: int, config: AceConfig) -> str | None:
    """One pass's input and output in their SRAMs, its scratch in whichever has room left
    (the assembler's placement)."""
    for gpu in algorithm.gpus:
        i, o, s = (gpu.chunks[b] * chunk for b in "ios")
        o = 0 if gpu.alias_o else o
        room = max(config.input_buffer_bytes - i, config.output_buffer_bytes - o)
        if i > config.input_buffer_bytes or o > config.output_buffer_bytes or s > room:
            return (f"one pass needs {i} + {o} + {s} bytes of input, output and scratch SRAM; "
                    f"the engine has {config.input_buffer_bytes} + {config.output_buffer_bytes}")
    return None


# -- lowering -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Layout:
    chunk_elems: int
    dtype: object
    op: object
    mode: str
    loops: int
    input_addr: int
    output_addr: int | None
    scratch_addr: int | None


def _lower_gpu(gpu: MscclGpu, folding: Folding, topology: Topology,
               layout: _Layout) -> NodeProgram:
    """One pass of ``gpu``'s threadblocks on their channels, in the folding's order."""
    g, ce, esize = gpu.id, layout.chunk_elems, DTYPE_BYTES[layout.dtype]
    in_elems = gpu.chunks["i"] * ce
    out_elems = in_elems if gpu.alias_o else gpu.chunks["o"] * ce
    ia = layout.input_addr
    oa = (layout.output_addr if layout.output_addr is not None
          else _align(ia + layout.loops * in_elems * esize))
    if gpu.alias_o and Mode(layout.mode).in_memory:
        oa = ia
    sa = (layout.scratch_addr if layout.scratch_addr is not None
          else _align(oa + layout.loops * out_elems * esize))
    node = NodeProgram(node=g, placement=Mode(layout.mode).placement,
                       input_addr=ia, output_addr=oa, scratch_addr=sa,
                       in_elems=layout.loops * in_elems, out_elems=layout.loops * out_elems,
                       scratch_elems=layout.loops * gpu.chunks["s"] * ce)
    width = max([folding.channel_of[(g, t)] + 1 for t in gpu.tbs] + [1])
    lists = [_channel_entries(gpu, c, folding, topology, layout) for c in range(width)]
    if layout.mode == Mode.ACE:
        _add_load_store(lists, gpu, folding, layout, ia, oa)
    node.channels = _resolve(lists, layout)
    for c, channel in enumerate(node.channels):
        on_c = [gpu.tbs[t] for t, _ in folding.sequence.get((g, c), [])]
        for side in ("send", "recv"):
            peers = {getattr(tb, side) for tb in on_c} - {-1}
            if len(peers) == 1:
                peer = peers.pop()
                link = topology.send_link(g, peer) if side == "send" else \
                    topology.recv_link(g, peer)
                setattr(channel, f"{side}_peer", peer)
                setattr(channel, f"{side}_link", link)
    return node


def _channel_entries(gpu: MscclGpu, c: int, folding: Folding, topology: Topology,
                     layout: _Layout) -> list:
    """Channel ``c``'s entries ``(Step, [refs], key)``; refs are ``("tb", t, s)`` steps of
    threadblocks on other channels, keys name the entry for them."""
    g, ce = gpu.id, layout.chunk_elems
    entries = []
    for t, s in folding.sequence.get((g, c), []):
        tb = gpu.tbs[t]
        st = tb.steps[s]
        step = Step(type=st.type, count=st.cnt * ce, dtype=layout.dtype, op=layout.op,
                    src=(st.src[0], st.src[1] * ce) if st.src else None,
                    dst=(st.dst[0], st.dst[1] * ce) if st.dst else None)
        if st.sends:
            step.send_peer, step.send_link = tb.send, topology.send_link(g, tb.send)
        if st.receives:
            step.recv_peer, step.recv_link = tb.recv, topology.recv_link(g, tb.recv)
        refs = [("tb", d_tb, d_s) for d_tb, d_s in st.deps
                if folding.channel_of[(g, d_tb)] != c]
        entries.append((step, refs, ("tb", t, s)))
    return entries


def _add_load_store(lists: list, gpu: MscclGpu, folding: Folding, layout: _Layout, ia: int,
                    oa: int) -> None:
    """ACE mode: the loads of the input and the stores of the output, each on the channel that
    needs it, overlapped with the communication (module docstring, "Loads and stores").

    The input and the output are cut into runs of chunks (:func:`_blocks`). A run's load goes
    just before the first step, in the schedule's global order, that touches its chunks, on
    that step's channel; its store just after the last step that writes its chunks (or after
    its load, when ``o`` aliases ``i`` and nothing writes them), on that step's channel. Every
    other step that touches a loaded run waits for its load, and a store waits for the last
    writer of its chunks on every other channel. Loads and stores thus take their places in
    one valid execution of the whole program, so the module's deadlock argument still holds."""
    g, ce, esize = gpu.id, layout.chunk_elems, DTYPE_BYTES[layout.dtype]
    out_buf = "i" if gpu.alias_o else "o"
    rank = {key: folding.rank[(g, *key[1:])] for entries in lists for _, _, key in entries}
    channel = {key: c for c, entries in enumerate(lists) for _, _, key in entries}
    loads, stores = _blocks(gpu.chunks["i"]), _blocks(gpu.chunks[out_buf])
    load_of = {j: n for n, (start, count) in enumerate(loads) for j in range(start, start + count)}
    store_of = {j: n for n, (start, count) in enumerate(stores)
                for j in range(start, start + count)}
    touchers = [[] for _ in loads]              # load run -> keys of the steps touching it
    writers = [[] for _ in stores]              # store run -> keys of the steps writing it
    for entries in lists:
        for _, _, key in entries:
            st = gpu.tbs[key[1]].steps[key[2]]
            for side, sl in (("src", st.src), ("dst", st.dst)):
                for j in range(sl[1], sl[1] + st.cnt) if sl else ():
                    if sl[0] == "i":
                        touchers[load_of[j]].append(key)
                    if side == "dst" and sl[0] == out_buf:
                        writers[store_of[j]].append(key)
    before, after, tail = {}, {}, []            # anchor key -> entries placed beside it
    waits = {}                                  # key -> keys of loads it waits for
    load_place = []                             # load run -> the list it was placed in
    dtype, op = layout.dtype, layout.op
    for n, (start, count) in enumerate(loads):
        load = (Step(type="load", count=count * ce, dst=("i", start * ce), dtype=dtype, op=op,
                     mem_addr=ia + start * ce * esize), [], ("load", n))
        first = min(touchers[n], key=rank.get, default=None)
        load_place.append(tail if first is None else before.setdefault(first, []))
        load_place[n].append(load)
        for key in touchers[n]:
            if channel[key] != channel[first]:
                waits.setdefault(key, set()).add(("load", n))
    for n, (start, count) in enumerate(stores):
        last = max(writers[n], key=rank.get, default=None)
        last_on = {}                            # other channel -> its last writer of the run
        for key in sorted(writers[n], key=rank.get):
            if channel[key] != channel.get(last):
                last_on[channel[key]] = key
        store = (Step(type="store", count=count * ce, src=(out_buf, start * ce), dtype=dtype,
                      op=op, mem_addr=oa + start * ce * esize), list(last_on.values()),
                 ("store", n))
        if last is None:        # nothing writes it: right after its load if in place
            (load_place[n] if gpu.alias_o else tail).append(store)
        else:
            after.setdefault(last, []).append(store)
    for c, entries in enumerate(lists):
        placed = []
        for step, refs, key in entries:
            placed += before.get(key, [])
            placed.append((step, refs + sorted(waits.get(key, ())), key))
            placed += after.get(key, [])
        lists[c] = placed
    lists[0] += tail
    _pass_barrier(lists, layout)


def _blocks(chunks: int) -> list[tuple[int, int]]:
    """``chunks`` cut into at most :data:`_LOAD_RUNS` runs of consecutive chunks, as equal as
    they come: ``(first chunk, chunks)``."""
    parts = min(_LOAD_RUNS, chunks)
    if not parts:
        return []
    bounds = [b * chunks // parts for b in range(parts + 1)]
    return [(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:])]


def _pass_barrier(lists: list, layout: _Layout) -> None:
    """Passes share the SRAM, so none may overlap the next (:func:`_repeat` repeats the lists):
    channel 0's pass starts with a marker (no dependency) and ends after every other channel's
    last step, and every other channel's first step waits for the marker."""
    others = [c for c in range(1, len(lists)) if lists[c]]
    nop = functools.partial(Step, type="nop", dtype=layout.dtype, op=layout.op)
    lists[0].insert(0, (nop(), [], ("pass",)))
    if others:
        lists[0].append((nop(), [("last", c) for c in others], ("barrier",)))
    for c in others:
        step, refs, key = lists[c][0]
        lists[c][0] = (step, refs + [("pass",)], key)


def _resolve(lists: list, layout: _Layout) -> list[Channel]:
    """Channels from entries: every dependency beyond the first becomes a ``nop`` in front of
    its step, then references become ``(channel, step index)``."""
    expanded = []
    for entries in lists:
        out = []
        for step, refs, key in entries:
            for ref in refs[:-1]:
                out.append((Step(type="nop", dtype=layout.dtype, op=layout.op), ref, None))
            out.append((step, refs[-1] if refs else None, key))
        expanded.append(out)
    index = {key: (c, k) for c, entries in enumerate(expanded)
             for k, (_, _, key) in enumerate(entries) if key is not None}
    channels = []
    for entries in expanded:
        steps = []
        for step, ref, _ in entries:
            if ref is not None:
                step.dep = ((ref[1], len(expanded[ref[1]]) - 1) if ref[0] == "last"
                            else index[ref])
            steps.append(step)
        channels.append(Channel(steps=steps))
    return channels


def _repeat(node: NodeProgram, gpu: MscclGpu, layout: _Layout) -> None:
    """Make ``node``'s one-pass program run ``layout.loops`` passes (see the module
    docstring)."""
    per_pass = {b: gpu.chunks[b] * layout.chunk_elems for b in "ios"}
    if gpu.alias_o:
        per_pass["o"] = per_pass["i"]
    esize = DTYPE_BYTES[layout.dtype]
    lengths = [len(ch.steps) for ch in node.channels]
    for ch in node.channels:
        one = ch.steps
        ch.steps = []
        for k in range(layout.loops):
            for step in one:
                step = Step(**{f: getattr(step, f) for f in step.__dataclass_fields__})
                if step.dep is not None:
                    step.dep = (step.dep[0], step.dep[1] + k * lengths[step.dep[0]])
                if layout.mode == Mode.ACE:
                    if step.type == "load":
                        step.mem_addr += k * per_pass["i"] * esize
                    elif step.type == "store":
                        step.mem_addr += k * per_pass["o"] * esize
                else:
                    for side in ("src", "dst"):
                        ref = getattr(step, side)
                        if ref is not None:
                            setattr(step, side, (ref[0], ref[1] + k * per_pass[ref[0]]))
                ch.steps.append(step)


def _align(addr: int, to: int = 4096) -> int:
    return -(-addr // to) * to
