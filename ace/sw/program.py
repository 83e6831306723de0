"""Collective programs: steps, channels, per-node programs, topologies, the text assembler and
the lowering of programs to instruction words (:mod:`ace.isa`).

A :class:`CollectiveProgram` holds one :class:`NodeProgram` per node. A node program has a few
:class:`Channel`\\ s, each an ordered list of :class:`Step`\\ s (one instruction each). Offsets
and counts in a :class:`Step` are in ELEMENTS of the step's dtype; :func:`assemble` converts
offsets to SRAM words (they must be word aligned) for a given :class:`~ace.config.AceConfig`.

The text form (:func:`to_text` / :func:`from_text`) has one step per line; see
``docs/programming_model.md`` for its grammar and a worked example.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from ace.isa import encode, to_words
from ace.layouts import DTYPE_BYTES, Dtype, ReduceOp
from ace.vocab import Buffer, Mode, StepType

__all__ = [
    "ProgramError", "STEP_TYPES", "BUFFERS", "PLACEMENTS", "Step", "Channel", "NodeProgram",
    "CollectiveProgram", "Topology", "AssembledNode", "AssembledProgram", "assemble",
    "to_text", "from_text", "dtype_from_name", "op_from_name", "split_aligned",
    "node_memory_size", "memory_footprint",
]


class ProgramError(ValueError):
    """A malformed program; the message names node, channel and step where it applies."""


#: Which operands each step type uses: src / dst slices, mem address, send / recv peers
#: (:attr:`ace.vocab.StepType.operands`; ``end`` is the assembler's, never a program's step).
STEP_TYPES: dict[StepType, frozenset] = {t: t.operands for t in StepType if t is not StepType.END}
#: Logical buffers: input ``i``, output ``o``, scratch ``s`` (:class:`ace.vocab.Buffer`).
BUFFERS = tuple(Buffer)
#: ``sram``: buffers are ACE SRAM regions (ACE mode); ``memory`` and ``p2p``: buffers are
#: main-memory regions (the staged and the point-to-point baseline).
#: :attr:`ace.vocab.Mode.placement`.
PLACEMENTS = tuple(mode.placement for mode in Mode)

_DTYPE_NAMES = {d.name.lower(): d for d in Dtype}
_OP_NAMES = {o.name.lower(): o for o in ReduceOp}


def dtype_from_name(value) -> Dtype:
    if isinstance(value, Dtype):
        return value
    try:
        return _DTYPE_NAMES[str(value).lower()]
    except KeyError:
        raise ProgramError(f"dtype: {value!r} is not a dtype; allowed: "
                           f"{', '.join(_DTYPE_NAMES)}") from None


def op_from_name(value) -> ReduceOp:
    if isinstance(value, ReduceOp):
        return value
    try:
        return _OP_NAMES[str(value).lower()]
    except KeyError:
        raise ProgramError(f"op: {value!r} is not a reduction op; allowed: "
                           f"{', '.join(_OP_NAMES)}") from None


def split_aligned(count: int, parts: int, align: int = 1,
                  weights: list[int] | None = None) -> list[tuple[int, int]]:
    """Split ``count`` elements into ``parts`` consecutive (start, length) slices whose starts
    are multiples of ``align`` elements (one SRAM word). Sizes differ by at most one word (or,
    with ``weights``, are proportional to them within one word); the last non-empty slice may
    end inside a word; trailing slices may be empty."""
    if parts < 1:
        raise ValueError(f"parts: {parts}; allowed: at least 1")
    words = -(-count // align)
    if weights is not None:
        total, acc, cuts = sum(weights), 0, [0]
        for w in weights:
            acc += w
            cuts.append(words * acc // total)
        return [(min(a * align, count), min(b * align, count) - min(a * align, count))
                for a, b in zip(cuts, cuts[1:])]
    base, extra = divmod(words, parts)
    out, word = [], 0
    for k in range(parts):
        n = base + (1 if k < extra else 0)
        start = min(word * align, count)
        end = min((word + n) * align, count)
        out.append((start, end - start))
        word += n
    return out


# -- steps and programs -------------------------------------------------------------------------

@dataclass
class Step:
    """One micro-operation of a channel.

    ``src``/``dst`` are ``(buffer, element offset)`` with buffer in :data:`BUFFERS`; ``count``
    is in elements of ``dtype``. ``send_peer``/``send_link`` and ``recv_peer``/``recv_link``
    name the node and local link of the send and the receive. ``dep = (channel, step)`` waits
    until that channel of the same node has completed at least ``step + 1`` steps.
    """
    type: str
    count: int = 0
    src: tuple[str, int] | None = None
    dst: tuple[str, int] | None = None
    dtype: Dtype = Dtype.INT32
    op: ReduceOp = ReduceOp.SUM
    mem_addr: int | None = None
    send_peer: int | None = None
    send_link: int | None = None
    recv_peer: int | None = None
    recv_link: int | None = None
    dep: tuple[int, int] | None = None

    @property
    def uses(self) -> frozenset:
        return STEP_TYPES[self.type]

    @property
    def nbytes(self) -> int:
        return self.count * DTYPE_BYTES[self.dtype]

    def check(self, where: str = "step") -> None:
        """Structural checks: type, operands present for the type, value ranges."""
        if self.type not in STEP_TYPES:
            raise ProgramError(f"{where}: type {self.type!r} is not a step type; allowed: "
                               f"{', '.join(STEP_TYPES)}")
        uses = STEP_TYPES[self.type]
        if not isinstance(self.count, int) or self.count < 0:
            raise ProgramError(f"{where}: count {self.count!r} must be an integer >= 0")
        for name in ("src", "dst"):
            value = getattr(self, name)
            if name in uses:
                if (not isinstance(value, tuple) or len(value) != 2 or value[0] not in BUFFERS
                        or not isinstance(value[1], int) or value[1] < 0):
                    raise ProgramError(f"{where}: {self.type} needs {name}=(buffer, offset) with "
                                       f"buffer in i/o/s and offset >= 0; got {value!r}")
        if "mem" in uses and (not isinstance(self.mem_addr, int) or self.mem_addr < 0):
            raise ProgramError(f"{where}: {self.type} needs mem_addr >= 0; got {self.mem_addr!r}")
        for side in ("send", "recv"):
            if side in uses:
                for attr in (f"{side}_peer", f"{side}_link"):
                    value = getattr(self, attr)
                    if not isinstance(value, int) or value < 0:
                        raise ProgramError(f"{where}: {self.type} needs {attr} >= 0; "
                                           f"got {value!r}")
        if self.dep is not None:
            if (not isinstance(self.dep, tuple) or len(self.dep) != 2
                    or any(not isinstance(v, int) or v < 0 for v in self.dep)):
                raise ProgramError(f"{where}: dep {self.dep!r} must be (channel, step) >= 0")
        if not isinstance(self.dtype, Dtype) or not isinstance(self.op, ReduceOp):
            raise ProgramError(f"{where}: dtype/op must be Dtype/ReduceOp members")


@dataclass
class Channel:
    """One sequencer channel: an ordered list of steps. ``send_peer``/``recv_peer`` (and links)
    are the channel's defaults, like an MSCCL threadblock's ``send``/``recv``; ``None`` when the
    channel talks to several peers (every step carries its own peer and link anyway)."""
    steps: list[Step] = field(default_factory=list)
    send_peer: int | None = None
    send_link: int | None = None
    recv_peer: int | None = None
    recv_link: int | None = None


@dataclass
class NodeProgram:
    """The program of one node. ``placement`` says where buffers live (``sram`` in ACE mode,
    ``memory`` in the staged baseline, ``p2p`` in the point-to-point one). ``*_addr`` are the
    main-memory byte addresses of the user input, the user output and the scratch region;
    ``*_elems`` their sizes in elements. In the memory placements buffer ``i`` is at
    ``input_addr``, ``o`` at ``output_addr`` and ``s`` at ``scratch_addr``; in ``sram``
    placement only load/store steps touch memory."""
    node: int
    channels: list[Channel] = field(default_factory=list)
    placement: str = Mode.ACE.placement
    input_addr: int = 0
    output_addr: int = 0
    scratch_addr: int = 0
    in_elems: int = 0
    out_elems: int = 0
    scratch_elems: int = 0

    @property
    def mode(self) -> Mode:
        """The :class:`~ace.vocab.Mode` that ``placement`` spells."""
        return Mode.parse(self.placement, ProgramError)

    def buffer_addr(self, buf: str) -> int:
        return {Buffer.INPUT: self.input_addr, Buffer.OUTPUT: self.output_addr,
                Buffer.SCRATCH: self.scratch_addr}[buf]


@dataclass
class CollectiveProgram:
    """Per-node programs plus what they compute. ``count`` is the collective's vector length in
    elements (see ``docs/programming_model.md`` for each collective's buffer sizes);
    ``blocks[j] = (start, length)`` is node ``j``'s block of the vector (reduce-scatter output,
    all-gather input, all-to-all destination block)."""
    collective: str
    algorithm: str
    dtype: Dtype
    op: ReduceOp
    count: int
    nodes: list[NodeProgram]
    topology: "Topology | None" = None
    mode: str = Mode.ACE
    chunks: int = 1
    blocks: list[tuple[int, int]] | None = None

    def __post_init__(self):
        try:        # aliases (``baseline``) become the mode; other values fail in validate()
            self.mode = Mode(self.mode)
        except ValueError:
            pass

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def bytes_per_node(self) -> int:
        return self.count * DTYPE_BYTES[self.dtype]

    def validate(self) -> None:
        """Structural checks of every step (types, operands, dependency references)."""
        if self.mode not in tuple(Mode):
            raise ProgramError(f"mode: {self.mode!r}; allowed: {', '.join(Mode)}")
        for n, node in enumerate(self.nodes):
            if node.node != n:
                raise ProgramError(f"node {n}: program says node {node.node}")
            if node.placement not in PLACEMENTS:
                raise ProgramError(f"node {n}: placement {node.placement!r}; allowed: "
                                   f"{', '.join(PLACEMENTS)}")
            for c, channel in enumerate(node.channels):
                for k, step in enumerate(channel.steps):
                    where = f"node {n} channel {c} step {k}"
                    step.check(where)
                    for side in ("send", "recv"):
                        peer = getattr(step, f"{side}_peer")
                        if side in step.uses and not 0 <= peer < len(self.nodes):
                            raise ProgramError(f"{where}: {side}_peer {peer} is not a node; "
                                               f"allowed: 0 to {len(self.nodes) - 1}")
                    if step.dep is not None:
                        dc, ds = step.dep
                        if dc >= len(node.channels) or ds >= len(node.channels[dc].steps):
                            raise ProgramError(f"{where}: dep {dc}.{ds} names no step (node has "
                                               f"{len(node.channels)} channels)")
                        if dc == c and ds >= k:
                            raise ProgramError(f"{where}: dep {dc}.{ds} waits on its own "
                                               "channel's current or a later step")


# -- topology -----------------------------------------------------------------------------------

_TOPOLOGY_KINDS = ("torus", "fully_connected", "switch")


@dataclass(frozen=True)
class Topology:
    """Network topology and the link numbering.

    * ``torus`` with ``dims = (d0, d1, ...)`` (``ring:p`` is a 1-D torus): node id
      ``x0 + d0*x1 + d0*d1*x2 ...``. Link ``2k`` goes to the ``+1`` neighbour in dimension ``k``,
      link ``2k+1`` to the ``-1`` neighbour. A link is bidirectional, so node ``x`` sends to its
      ``+1`` neighbour on its link ``2k`` and that neighbour receives it on its link ``2k+1``.
      In a dimension of size 2 both neighbours are the same node and both links are used (sends
      go out on ``2k``, receives come in on ``2k+1``). Dimensions of size 1 use no link.
    * ``fully_connected``: node ``x`` reaches peer ``y`` on link ``(y - x - 1) mod p``.
    * ``switch``: every node has one port to a switch that reaches every peer. The NIC sees
      one *virtual* link per peer, numbered as in ``fully_connected`` (each with its own
      receive buffers and credits, like a switch's per-source queues); the virtual links of a
      node share the port's bandwidth (the system model's :mod:`sim_harness.switch`).

    ``dims`` also gives the hierarchy that multi-dimensional collectives compose over, for all
    three kinds.
    """
    kind: str
    dims: tuple[int, ...]

    def __post_init__(self):
        if self.kind not in _TOPOLOGY_KINDS:
            raise ProgramError(f"topology: kind {self.kind!r}; allowed: "
                               f"{', '.join(_TOPOLOGY_KINDS)} (or ring)")
        if not self.dims or any(not isinstance(d, int) or d < 1 for d in self.dims):
            raise ProgramError(f"topology: dims {self.dims!r} must be positive integers")

    @classmethod
    def ring(cls, p: int) -> "Topology":
        return cls("torus", (p,))

    @classmethod
    def torus(cls, *dims) -> "Topology":
        return cls("torus", tuple(dims[0]) if len(dims) == 1 and not isinstance(dims[0], int)
                   else tuple(dims))

    @classmethod
    def fully_connected(cls, *dims) -> "Topology":
        return cls("fully_connected", tuple(dims[0]) if len(dims) == 1 and not isinstance(
            dims[0], int) else tuple(dims))

    @classmethod
    def switch(cls, *dims) -> "Topology":
        return cls("switch", tuple(dims[0]) if len(dims) == 1 and not isinstance(
            dims[0], int) else tuple(dims))

    @classmethod
    def parse(cls, text: str) -> "Topology":
        """``ring:8``, ``torus:4x2``, ``fully_connected:8``, ``switch:4x2``."""
        match = re.fullmatch(r"(\w+):(\d+(?:x\d+)*)", text.strip())
        if not match:
            raise ProgramError(f"topology: {text!r}; expected kind:DIMS such as torus:4x2")
        kind, dims = match.group(1), tuple(int(d) for d in match.group(2).split("x"))
        if kind == "ring":
            if len(dims) != 1:
                raise ProgramError(f"topology: {text!r}; a ring has one dimension")
            kind = "torus"
        return cls(kind, dims)

    def __str__(self):
        return f"{self.kind}:{'x'.join(str(d) for d in self.dims)}"

    @property
    def num_nodes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def num_links(self) -> int:
        """Links each node needs."""
        if self.kind == "torus":
            return 2 * len(self.dims)
        return max(1, self.num_nodes - 1)      # fully_connected, switch (virtual links)

    def coords(self, node: int) -> tuple[int, ...]:
        out = []
        for d in self.dims:
            out.append(node % d)
            node //= d
        return tuple(out)

    def node(self, coords) -> int:
        n, scale = 0, 1
        for c, d in zip(coords, self.dims):
            n += (c % d) * scale
            scale *= d
        return n

    def group(self, node: int, dim: int) -> list[int]:
        """Nodes that differ from ``node`` only in coordinate ``dim``, by that coordinate."""
        coords = list(self.coords(node))
        out = []
        for x in range(self.dims[dim]):
            coords[dim] = x
            out.append(self.node(coords))
        return out

    def _torus_dim(self, x: int, y: int) -> tuple[int, int]:
        cx, cy = self.coords(x), self.coords(y)
        diff = [k for k in range(len(self.dims)) if cx[k] != cy[k]]
        if len(diff) != 1:
            raise ProgramError(f"topology {self}: nodes {x} and {y} are not neighbours")
        k = diff[0]
        delta = (cy[k] - cx[k]) % self.dims[k]
        return k, delta

    def send_link(self, x: int, y: int) -> int:
        """Local link on which node ``x`` sends to node ``y``."""
        self._check_pair(x, y)
        if self.kind != "torus":
            return (y - x - 1) % self.num_nodes
        k, delta = self._torus_dim(x, y)
        if delta == 1:
            return 2 * k
        if delta == self.dims[k] - 1:
            return 2 * k + 1
        raise ProgramError(f"topology {self}: node {y} is not a neighbour of node {x} "
                           f"(distance {min(delta, self.dims[k] - delta)} in dimension {k}); "
                           "use a fully_connected or switch topology for this algorithm")

    def recv_link(self, x: int, y: int) -> int:
        """Local link on which node ``x`` receives from node ``y``."""
        self._check_pair(x, y)
        if self.kind != "torus":
            return (y - x - 1) % self.num_nodes
        k, delta = self._torus_dim(x, y)
        if delta == self.dims[k] - 1:
            return 2 * k + 1
        if delta == 1:
            return 2 * k
        raise ProgramError(f"topology {self}: node {y} is not a neighbour of node {x} "
                           f"(distance {min(delta, self.dims[k] - delta)} in dimension {k}); "
                           "use a fully_connected or switch topology for this algorithm")

    def _check_pair(self, x, y):
        p = self.num_nodes
        if not (0 <= x < p and 0 <= y < p) or x == y:
            raise ProgramError(f"topology {self}: no link between nodes {x} and {y}")


# -- assembly to instruction words --------------------------------------------------------------

@dataclass
class AssembledNode:
    """Instruction words of one node, and its buffer table: ``placement`` and, per buffer,
    the base the hardware adds to a step's word offset (an SRAM word address in the unified
    input+output SRAM space for ``sram``, a byte address for ``memory`` and ``p2p``)."""
    node: int
    placement: str
    buffer_base: dict[str, int]
    instructions: list[list[int]]    # per channel: instruction ints, ``end`` included
    words: list[list[int]]           # per channel: 32-bit words, ``INSTR_WORDS`` per step


@dataclass
class AssembledProgram:
    nodes: list[AssembledNode]


def _words_of(elems: int, dtype: Dtype, link_bytes: int) -> int:
    return -(-(elems * DTYPE_BYTES[dtype]) // link_bytes)


def assemble(program: CollectiveProgram, config) -> AssembledProgram:
    """Lower every node's program to instruction words for ``config``.

    Checks: channels <= ``num_channels``; steps + ``end`` <= ``program_words``; links <
    ``num_links``; peers and dependencies in range; data steps with count >= 1; offsets word
    aligned; in ``sram`` placement every slice inside its SRAM region (``i`` in the input SRAM,
    ``o`` in the output SRAM, ``s`` in whichever has room after them). Errors name the node,
    channel and step.
    """
    program.validate()
    out = []
    for n, node in enumerate(program.nodes):
        if len(node.channels) > config.num_channels:
            raise ProgramError(f"node {n}: {len(node.channels)} channels; the configuration has "
                               f"num_channels = {config.num_channels}")
        extent = dict.fromkeys(Buffer, 0)
        for c, channel in enumerate(node.channels):
            if len(channel.steps) + 1 > config.program_words:
                raise ProgramError(f"node {n} channel {c}: {len(channel.steps)} steps + end do "
                                   f"not fit program_words = {config.program_words}")
            for k, step in enumerate(channel.steps):
                where = f"node {n} channel {c} step {k} ({step.type})"
                if step.type != StepType.NOP and step.count < 1:
                    raise ProgramError(f"{where}: count {step.count}; allowed: at least 1")
                for name in ("src", "dst"):
                    if name not in step.uses:
                        continue
                    buf, off = getattr(step, name)
                    if (off * DTYPE_BYTES[step.dtype]) % config.link_bytes:
                        raise ProgramError(
                            f"{where}: {name} offset {off} elements is not a multiple of an SRAM "
                            f"word ({config.link_bytes // DTYPE_BYTES[step.dtype]} elements of "
                            f"{step.dtype.name.lower()})")
                    extent[buf] = max(extent[buf],
                                      _words_of(off + step.count, step.dtype, config.link_bytes))
                for side in ("send", "recv"):
                    if side in step.uses and getattr(step, f"{side}_link") >= config.num_links:
                        raise ProgramError(f"{where}: {side}_link {getattr(step, side + '_link')}"
                                           f" is out of range; allowed: 0 to "
                                           f"{config.num_links - 1}")
                if "mem" in step.uses and step.mem_addr >> config.mem_addr_bits:
                    raise ProgramError(f"{where}: mem_addr {step.mem_addr:#x} does not fit "
                                       f"mem_addr_bits = {config.mem_addr_bits}")
        if node.mode is Mode.ACE:
            in_words, out_words = config.input_buffer_words, config.output_buffer_words
            for buf, limit, name in ((Buffer.INPUT, in_words, "input"),
                                     (Buffer.OUTPUT, out_words, "output")):
                if extent[buf] > limit:
                    raise ProgramError(f"node {n}: buffer {buf} needs {extent[buf]} words; the "
                                       f"{name} SRAM has {limit} words "
                                       f"({name}_buffer_bytes = {limit * config.link_bytes})")
            used_in, used_out = extent[Buffer.INPUT], extent[Buffer.OUTPUT]
            scratch = extent[Buffer.SCRATCH]
            base = {Buffer.INPUT: 0, Buffer.OUTPUT: in_words}
            if used_in + scratch <= in_words:
                base[Buffer.SCRATCH] = used_in
            elif used_out + scratch <= out_words:
                base[Buffer.SCRATCH] = in_words + used_out
            else:
                raise ProgramError(f"node {n}: scratch buffer s needs {scratch} words; "
                                   f"neither SRAM has room after i ({used_in} of {in_words})"
                                   f" or o ({used_out} of {out_words})")
        else:
            base = {b: node.buffer_addr(b) for b in BUFFERS}
        instructions, words = [], []
        for c, channel in enumerate(node.channels):
            ints = []
            for k, step in enumerate(channel.steps):
                try:
                    ints.append(encode_step(step, config.link_bytes))
                except ValueError as error:
                    raise ProgramError(f"node {n} channel {c} step {k} ({step.type}): "
                                       f"{error}") from None
            ints.append(encode(opcode=StepType.END))
            instructions.append(ints)
            words.append([w for i in ints for w in to_words(i)])
        out.append(AssembledNode(n, node.placement, base, instructions, words))
    return AssembledProgram(out)


def encode_step(step: Step, link_bytes: int) -> int:
    """One step as an instruction int (offsets converted to words of ``link_bytes``)."""
    esize = DTYPE_BYTES[step.dtype]
    fields = {"opcode": step.type, "dtype": step.dtype, "op": step.op, "count": step.count}
    if step.src is not None and "src" in step.uses:
        fields["src_buf"] = step.src[0]
        fields["src_off"] = step.src[1] * esize // link_bytes
    if step.dst is not None and "dst" in step.uses:
        fields["dst_buf"] = step.dst[0]
        fields["dst_off"] = step.dst[1] * esize // link_bytes
    if "mem" in step.uses:
        fields["mem_addr"] = step.mem_addr
    if "send" in step.uses:
        fields["send_peer"], fields["send_link"] = step.send_peer, step.send_link
    if "recv" in step.uses:
        fields["recv_peer"], fields["recv_link"] = step.recv_peer, step.recv_link
    if step.dep is not None:
        fields["dep_valid"] = 1
        fields["dep_channel"], fields["dep_step"] = step.dep
    return encode(**fields)


def decode_step(bits: int, link_bytes: int) -> Step:
    """Inverse of :func:`encode_step` (``end`` decodes to a Step of type ``end``)."""
    from ace.isa import BUF_NAMES, OPCODE_NAMES, decode
    f = decode(bits)
    name = OPCODE_NAMES[f["opcode"]]
    step = Step(type=name, count=f["count"], dtype=f["dtype"], op=f["op"])
    if name == StepType.END:
        return step
    esize = DTYPE_BYTES[f["dtype"]]
    uses = STEP_TYPES[name]
    if "src" in uses:
        step.src = (BUF_NAMES[f["src_buf"]], f["src_off"] * link_bytes // esize)
    if "dst" in uses:
        step.dst = (BUF_NAMES[f["dst_buf"]], f["dst_off"] * link_bytes // esize)
    if "mem" in uses:
        step.mem_addr = f["mem_addr"]
    if "send" in uses:
        step.send_peer, step.send_link = f["send_peer"], f["send_link"]
    if "recv" in uses:
        step.recv_peer, step.recv_link = f["recv_peer"], f["recv_link"]
    if f["dep_valid"]:
        step.dep = (f["dep_channel"], f["dep_step"])
    return step


__all__ += ["encode_step", "decode_step"]


# -- text form ----------------------------------------------------------------------------------
#
#   program collective=allreduce algorithm=ring mode=ace dtype=int32 op=sum count=64 chunks=1
#           topology=torus:4 blocks=0+16,16+16,32+16,48+16
#   node 0 placement=sram input=0x0 output=0x1000 scratch=0x2000 in=64 out=64 scratch_elems=0
#   channel 0 send=1@0 recv=3@1
#     0: load dst=i[0] count=64 mem=0x0
#     1: s src=i[48] count=16 to=1@0
#     2: rrs src=i[32] count=16 from=3@1 to=1@0 dep=1.4
#
# ``#`` starts a comment. ``dtype=``/``op=`` on a step override the program's. ``to=``/``from=``
# default to the channel's ``send=``/``recv=``.

def _slice_text(value) -> str:
    return f"{value[0]}[{value[1]}]"


def _step_text(step: Step, program: CollectiveProgram, channel: Channel) -> str:
    parts = [step.type]
    if "src" in step.uses:
        parts.append(f"src={_slice_text(step.src)}")
    if "dst" in step.uses:
        parts.append(f"dst={_slice_text(step.dst)}")
    if step.type != StepType.NOP:
        parts.append(f"count={step.count}")
    if "mem" in step.uses:
        parts.append(f"mem={step.mem_addr:#x}")
    if "recv" in step.uses and (step.recv_peer, step.recv_link) != (channel.recv_peer,
                                                                     channel.recv_link):
        parts.append(f"from={step.recv_peer}@{step.recv_link}")
    if "send" in step.uses and (step.send_peer, step.send_link) != (channel.send_peer,
                                                                     channel.send_link):
        parts.append(f"to={step.send_peer}@{step.send_link}")
    if step.dtype != program.dtype:
        parts.append(f"dtype={step.dtype.name.lower()}")
    if step.op != program.op:
        parts.append(f"op={step.op.name.lower()}")
    if step.dep is not None:
        parts.append(f"dep={step.dep[0]}.{step.dep[1]}")
    return " ".join(parts)


def to_text(program: CollectiveProgram) -> str:
    """The readable listing: one line per step."""
    head = (f"program collective={program.collective} algorithm={program.algorithm} "
            f"mode={program.mode} dtype={program.dtype.name.lower()} "
            f"op={program.op.name.lower()} count={program.count} chunks={program.chunks}")
    if program.topology is not None:
        head += f" topology={program.topology}"
    if program.blocks is not None:
        head += " blocks=" + ",".join(f"{s}+{n}" for s, n in program.blocks)
    lines = [head]
    for node in program.nodes:
        lines.append(f"node {node.node} placement={node.placement} input={node.input_addr:#x} "
                     f"output={node.output_addr:#x} scratch={node.scratch_addr:#x} "
                     f"in={node.in_elems} out={node.out_elems} "
                     f"scratch_elems={node.scratch_elems}")
        for c, channel in enumerate(node.channels):
            head = f"channel {c}"
            if channel.send_peer is not None:
                head += f" send={channel.send_peer}@{channel.send_link}"
            if channel.recv_peer is not None:
                head += f" recv={channel.recv_peer}@{channel.recv_link}"
            lines.append(head)
            for k, step in enumerate(channel.steps):
                lines.append(f"  {k}: {_step_text(step, program, channel)}")
    return "\n".join(lines) + "\n"


def _int(text: str, where: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise ProgramError(f"{where}: {text!r} is not an integer") from None


def _keyvals(tokens, where: str) -> dict[str, str]:
    out = {}
    for token in tokens:
        if "=" not in token:
            raise ProgramError(f"{where}: {token!r} is not key=value")
        key, value = token.split("=", 1)
        if key in out:
            raise ProgramError(f"{where}: {key} given twice")
        out[key] = value
    return out


def _peer_link(text: str, where: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)@(\d+)", text)
    if not match:
        raise ProgramError(f"{where}: {text!r} is not PEER@LINK")
    return int(match.group(1)), int(match.group(2))


def _slice(text: str, where: str) -> tuple[Buffer, int]:
    match = re.fullmatch(rf"([{''.join(Buffer)}])\[(\d+)\]", text)
    if not match:
        raise ProgramError(f"{where}: {text!r} is not BUF[OFFSET] with BUF in "
                           f"{', '.join(Buffer)}")
    return Buffer(match.group(1)), int(match.group(2))


def from_text(text: str, *, source: str = "<text>") -> CollectiveProgram:
    """Parse the listing of :func:`to_text`. Errors name the source and the line."""
    program = node = channel = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{number}"
        tokens = line.split()
        if tokens[0] == "program":
            program = _parse_program(tokens, where)
        elif program is None:
            raise ProgramError(f"{where}: expected the 'program' line first")
        elif tokens[0] == "node":
            node, channel = _parse_node(tokens, where, program), None
            program.nodes.append(node)
        elif tokens[0] == "channel":
            channel = _parse_channel(tokens, where, node)
            node.channels.append(channel)
        else:
            step = _parse_step(tokens, where, program, channel)
            channel.steps.append(step)
    if program is None:
        raise ProgramError(f"{source}: no 'program' line")
    return program


def _parse_program(tokens, where: str) -> CollectiveProgram:
    kv = _keyvals(tokens[1:], where)
    for key in ("collective", "algorithm", "dtype", "op", "count"):
        if key not in kv:
            raise ProgramError(f"{where}: program line needs {key}=")
    blocks = None
    if "blocks" in kv:
        blocks = []
        for item in kv["blocks"].split(","):
            s, _, n = item.partition("+")
            blocks.append((_int(s, where), _int(n, where)))
    return CollectiveProgram(
        collective=kv["collective"], algorithm=kv["algorithm"],
        dtype=dtype_from_name(kv["dtype"]), op=op_from_name(kv["op"]),
        count=_int(kv["count"], where), nodes=[], mode=kv.get("mode", Mode.ACE),
        chunks=_int(kv.get("chunks", "1"), where),
        topology=Topology.parse(kv["topology"]) if "topology" in kv else None,
        blocks=blocks)


def _parse_node(tokens, where: str, program: CollectiveProgram) -> NodeProgram:
    if len(tokens) < 2:
        raise ProgramError(f"{where}: 'node' needs an id")
    n = _int(tokens[1], where)
    if n != len(program.nodes):
        raise ProgramError(f"{where}: node {n} out of order; expected {len(program.nodes)}")
    kv = _keyvals(tokens[2:], where)
    return NodeProgram(node=n, placement=kv.get("placement", Mode.ACE.placement),
                       input_addr=_int(kv.get("input", "0"), where),
                       output_addr=_int(kv.get("output", "0"), where),
                       scratch_addr=_int(kv.get("scratch", "0"), where),
                       in_elems=_int(kv.get("in", "0"), where),
                       out_elems=_int(kv.get("out", "0"), where),
                       scratch_elems=_int(kv.get("scratch_elems", "0"), where))


def _parse_channel(tokens, where: str, node: NodeProgram | None) -> Channel:
    if node is None:
        raise ProgramError(f"{where}: 'channel' before any 'node'")
    c = _int(tokens[1], where) if len(tokens) > 1 else -1
    if c != len(node.channels):
        raise ProgramError(f"{where}: channel {c} out of order; expected {len(node.channels)}")
    kv = _keyvals(tokens[2:], where)
    channel = Channel()
    if "send" in kv:
        channel.send_peer, channel.send_link = _peer_link(kv["send"], where)
    if "recv" in kv:
        channel.recv_peer, channel.recv_link = _peer_link(kv["recv"], where)
    return channel


_STEP_KEYS = ("count", "dep", "dst", "dtype", "from", "mem", "op", "src", "to")


def _parse_step(tokens, where: str, program: CollectiveProgram, channel: Channel | None
                ) -> Step:
    """``K: TYPE key=value ...``; ``to=``/``from=`` default to the channel's peers."""
    match = re.fullmatch(r"(\d+):", tokens[0])
    if not match:
        raise ProgramError(f"{where}: expected 'program', 'node', 'channel' or 'K: step'")
    if channel is None:
        raise ProgramError(f"{where}: step before any 'channel'")
    k = int(match.group(1))
    if k != len(channel.steps):
        raise ProgramError(f"{where}: step {k} out of order; expected {len(channel.steps)}")
    if len(tokens) < 2 or tokens[1] not in STEP_TYPES:
        raise ProgramError(f"{where}: step type {tokens[1] if len(tokens) > 1 else ''!r}; "
                           f"allowed: {', '.join(STEP_TYPES)}")
    step = Step(type=StepType(tokens[1]), dtype=program.dtype, op=program.op)
    for key, value in _keyvals(tokens[2:], where).items():
        _set_step_field(step, key, value, where)
    if "recv" in step.uses and step.recv_peer is None:
        step.recv_peer, step.recv_link = channel.recv_peer, channel.recv_link
    if "send" in step.uses and step.send_peer is None:
        step.send_peer, step.send_link = channel.send_peer, channel.send_link
    step.check(where)
    return step


def _set_step_field(step: Step, key: str, value: str, where: str) -> None:
    if key in ("src", "dst"):
        setattr(step, key, _slice(value, where))
    elif key in ("count", "mem"):
        setattr(step, "count" if key == "count" else "mem_addr", _int(value, where))
    elif key in ("from", "to"):
        side = "recv" if key == "from" else "send"
        peer, link = _peer_link(value, where)
        setattr(step, f"{side}_peer", peer)
        setattr(step, f"{side}_link", link)
    elif key == "dtype":
        step.dtype = dtype_from_name(value)
    elif key == "op":
        step.op = op_from_name(value)
    elif key == "dep":
        m = re.fullmatch(r"(\d+)\.(\d+)", value)
        if not m:
            raise ProgramError(f"{where}: dep {value!r} is not CHANNEL.STEP")
        step.dep = (int(m.group(1)), int(m.group(2)))
    else:
        raise ProgramError(f"{where}: unknown key {key!r}; allowed: {', '.join(_STEP_KEYS)}")


def copy_program(program: CollectiveProgram) -> CollectiveProgram:
    """A deep copy (steps are mutable)."""
    return dataclasses.replace(
        program, nodes=[dataclasses.replace(
            node, channels=[dataclasses.replace(ch, steps=[dataclasses.replace(s)
                                                           for s in ch.steps])
                            for ch in node.channels]) for node in program.nodes],
        blocks=None if program.blocks is None else list(program.blocks))


__all__ += ["copy_program"]


# -- memory traffic -----------------------------------------------------------------------------

def step_memory_traffic(step: Step, placement: str) -> tuple[int, int]:
    """(bytes read, bytes written) on the memory port for one step; ``placement`` is the
    node's ``sram``/``memory``/``p2p`` or a :class:`~ace.vocab.Mode` (docs/engine.md,
    "Placement", gives the micro-steps behind each figure).

    ``sram`` placement (``ace``): only ``load`` (reads) and ``store`` (writes) touch memory.
    ``memory`` placement (``staged``, NCCL over a network transport): every receive is written
    to memory, every reduction reads both operands from memory and writes its result, and every
    send reads its data from memory. ``p2p`` placement (NCCL between GPUs over NVLink): the
    same, except that a reduction whose result is sent (``rrs``, ``rrcs``) feeds the link
    directly, with no send buffer in memory. Per step of n bytes:

    ====== ========= ========= =====================================================
    step   staged    p2p       read / written, and why
    ====== ========= ========= =====================================================
    s      n / 0     n / 0     the send reads its slice
    r      0 / n     0 / n     the receive lands in dst
    rcs    n / n     n / n     lands in dst, read back to forward it
    rrc    2n / 2n   2n / 2n   lands in stage; stage and src read; result to dst
    rrcs   3n / 2n   2n / 2n   as rrc; staged reads dst back to send, p2p sends the result
    rrs    3n / 2n   2n / n    staged: result to stage2, read back to send; p2p: sent
    cpy    n / n     n / n     src read, dst written
    re     2n / n    2n / n    src and dst read, dst written
    load   n / n     n / n     a memory-to-memory copy (ace: n / 0)
    store  n / n     n / n     a memory-to-memory copy (ace: 0 / n)
    nop    0 / 0     0 / 0
    ====== ========= ========= =====================================================
    """
    read, write = _TRAFFIC[Mode.parse(placement, ProgramError)].get(step.type, (0, 0))
    return read * step.nbytes, write * step.nbytes


#: Memory-port (read, write) bytes per payload byte, per mode: ``ace`` touches memory in the
#: DMA steps only; the baselines follow the table of :func:`step_memory_traffic`.
_STAGED_TRAFFIC = {
    StepType.SEND: (1, 0), StepType.RECV: (0, 1), StepType.RCS: (1, 1), StepType.RRC: (2, 2),
    StepType.RRCS: (3, 2), StepType.RRS: (3, 2), StepType.CPY: (1, 1), StepType.RE: (2, 1),
    StepType.LOAD: (1, 1), StepType.STORE: (1, 1),
}
_TRAFFIC = {
    Mode.ACE: {StepType.LOAD: (1, 0), StepType.STORE: (0, 1)},
    Mode.STAGED: _STAGED_TRAFFIC,
    Mode.P2P: _STAGED_TRAFFIC | {StepType.RRCS: (2, 2), StepType.RRS: (2, 1)},
}


def memory_traffic(program: CollectiveProgram) -> dict:
    """Expected memory-port traffic of ``program``: per node ``(read, write)`` bytes and the
    totals. For an ACE-mode all-reduce of S bytes per node every node reads S and writes S."""
    per_node = []
    for node in program.nodes:
        read = write = 0
        for channel in node.channels:
            for step in channel.steps:
                r, w = step_memory_traffic(step, node.placement)
                read += r
                write += w
        per_node.append((read, write))
    return {"per_node": per_node,
            "read": sum(r for r, _ in per_node), "write": sum(w for _, w in per_node),
            "total": sum(r + w for r, w in per_node)}


def link_traffic(program: CollectiveProgram) -> dict[tuple[int, str, int], int]:
    """Payload bytes per ``(node, "tx"|"rx", link)`` that the program moves."""
    out: dict = {}
    for node in program.nodes:
        for channel in node.channels:
            for step in channel.steps:
                if "send" in step.uses:
                    key = (node.node, "tx", step.send_link)
                    out[key] = out.get(key, 0) + step.nbytes
                if "recv" in step.uses:
                    key = (node.node, "rx", step.recv_link)
                    out[key] = out.get(key, 0) + step.nbytes
    return out


__all__ += ["step_memory_traffic", "memory_traffic", "link_traffic"]


def node_memory_size(program: CollectiveProgram, node: NodeProgram) -> int:
    """Bytes of main memory from address 0 that one node's program touches."""
    esize = DTYPE_BYTES[program.dtype]
    size = max(node.input_addr + node.in_elems * esize, node.output_addr + node.out_elems * esize,
               node.scratch_addr + node.scratch_elems * esize, 1)
    for channel in node.channels:
        for step in channel.steps:
            if "mem" in step.uses:
                size = max(size, step.mem_addr + step.nbytes)
            if node.mode.in_memory:
                for name in ("src", "dst"):
                    if name in step.uses:
                        buf, off = getattr(step, name)
                        size = max(size, node.buffer_addr(buf) + (off + step.count)
                                   * DTYPE_BYTES[step.dtype])
    return size


def memory_footprint(program: CollectiveProgram) -> int:
    """Bytes of main memory from address 0 that any node's program touches."""
    return max(node_memory_size(program, node) for node in program.nodes)
