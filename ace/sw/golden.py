"""Golden model: executes a :class:`~ace.sw.program.CollectiveProgram` on numpy arrays for every
node, with the hardware's semantics, so its results are the bit-exact expected values.

Semantics (also in ``docs/programming_model.md``):

* each channel executes its steps in order; a step starts only when its dependency
  ``dep = (c, k)`` is met (channel ``c`` of the same node completed at least ``k + 1`` steps);
* a send puts one message on the FIFO of ``(src node, dst node, channel)``; a receive takes the
  oldest message of ``(recv_peer, node, channel)`` and its length must equal the step's bytes;
  sends never block (the NIC's credits and buffers carry the message);
* reductions are :func:`ace.numerics.reduce_elements` with ``a`` = the received data (``rrc``,
  ``rrs``, ``rrcs``) or the ``src`` slice (``re``) and ``b`` = the local ``src`` slice (``rrc``,
  ``rrs``, ``rrcs``) or the ``dst`` slice (``re``);
* ``sram`` placement: buffers are SRAM regions, memory is touched by load/store only;
  ``memory`` and ``p2p`` placement (the staged and the point-to-point baseline): buffers
  ``i``/``o``/``s`` are the node's memory at ``input_addr``, ``output_addr``, ``scratch_addr``;
  the results are the same in every placement, the memory bytes counted per step are
  :func:`~ace.sw.program.step_memory_traffic`'s for the placement.

When no channel can make progress before all are done, :class:`DeadlockError` lists every
blocked step and what it waits for. Messages left unreceived at the end are an error too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ace.layouts import DTYPE_BYTES
from ace.numerics import BITS_DTYPE, NP_DTYPE, reduce_elements, to_bits
from ace.sw.program import (CollectiveProgram, NodeProgram, ProgramError, Step,
                            node_memory_size, step_memory_traffic)
from ace.vocab import Buffer, Mode, StepType

__all__ = ["GoldenError", "DeadlockError", "GoldenResult", "run", "place_inputs"]


class GoldenError(RuntimeError):
    """The program cannot run: bad message match, out-of-bounds slice, leftover messages."""


class DeadlockError(GoldenError):
    """No channel can make progress; the message lists the blocked steps."""


@dataclass
class GoldenResult:
    outputs: list[np.ndarray]                 # per node: out_elems elements at output_addr
    memory: list[np.ndarray]                  # per node: the memory image (uint8)
    sram: list[dict[str, np.ndarray]]         # per node: SRAM regions by Buffer (uint8)
    link_tx_bytes: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, link)
    link_rx_bytes: dict[tuple[int, int], int] = field(default_factory=dict)
    mem_read_bytes: list[int] = field(default_factory=list)   # per node
    mem_write_bytes: list[int] = field(default_factory=list)
    steps_executed: int = 0
    messages: int = 0

    @property
    def mem_bytes(self) -> int:
        return sum(self.mem_read_bytes) + sum(self.mem_write_bytes)


def place_inputs(program: CollectiveProgram, inputs) -> list[np.ndarray]:
    """Memory images with each node's input at its ``input_addr``."""
    if len(inputs) != program.num_nodes:
        raise GoldenError(f"inputs: {len(inputs)} arrays for {program.num_nodes} nodes")
    memories = []
    for node, data in zip(program.nodes, inputs):
        mem = np.zeros(node_memory_size(program, node), dtype=np.uint8)
        bits = to_bits(program.dtype, data).reshape(-1)
        if bits.size != node.in_elems:
            raise GoldenError(f"node {node.node}: input has {bits.size} elements; the program "
                              f"expects {node.in_elems}")
        raw = bits.astype(bits.dtype.newbyteorder("<")).tobytes()
        mem[node.input_addr:node.input_addr + len(raw)] = np.frombuffer(raw, np.uint8)
        memories.append(mem)
    return memories


def run(program: CollectiveProgram, inputs, *, max_steps: int | None = None) -> GoldenResult:
    """Execute ``program`` with ``inputs[n]`` (elements or bit patterns of the program's dtype)
    as node ``n``'s input; return the outputs, memories and traffic counters."""
    machine = _Machine(program, place_inputs(program, inputs))
    machine.run(max_steps)
    return machine.finish()


def _elems(raw: np.ndarray, dtype) -> np.ndarray:
    """Little-endian bytes as elements of ``dtype``."""
    return raw.view(BITS_DTYPE[dtype].newbyteorder("<")).astype(BITS_DTYPE[dtype]) \
              .view(NP_DTYPE[dtype])


def _raw(values: np.ndarray, dtype) -> np.ndarray:
    """Elements of ``dtype`` as little-endian bytes."""
    bits = to_bits(dtype, values)
    return np.frombuffer(bits.astype(bits.dtype.newbyteorder("<")).tobytes(), np.uint8)


def _reduce(step: Step, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a (+) b`` of two byte slices, with the step's op and dtype, as bytes."""
    return _raw(reduce_elements(step.op, step.dtype, _elems(a, step.dtype),
                                _elems(b, step.dtype)), step.dtype)


def _sram_regions(node: NodeProgram) -> dict[Buffer, np.ndarray]:
    """Zeroed SRAM regions, each as large as the node's steps use (``sram`` placement)."""
    extent = dict.fromkeys(Buffer, 0)
    if node.mode is Mode.ACE:
        for channel in node.channels:
            for step in channel.steps:
                for name in ("src", "dst"):
                    if name in step.uses:
                        buf, off = getattr(step, name)
                        extent[buf] = max(extent[buf],
                                          (off + step.count) * DTYPE_BYTES[step.dtype])
    return {b: np.zeros(n, dtype=np.uint8) for b, n in extent.items()}


def _check_steps(program: CollectiveProgram) -> None:
    """Every step well formed and its peers nodes of the program, as :class:`GoldenError`."""
    nodes = program.nodes
    for n, node in enumerate(nodes):
        for c, channel in enumerate(node.channels):
            for k, step in enumerate(channel.steps):
                try:
                    step.check(f"node {n} channel {c} step {k}")
                except ProgramError as error:
                    raise GoldenError(str(error)) from None
                for side in ("send", "recv"):
                    if side in step.uses and not 0 <= getattr(step, f"{side}_peer") < len(nodes):
                        raise GoldenError(f"node {n} channel {c} step {k}: {side}_peer "
                                          f"{getattr(step, side + '_peer')} is not a node")


class _Machine:
    """Every node's channels, memory, SRAM and the message FIFOs of one run: ``pc[n][c]`` is
    the next step of channel c of node n; ``fifos[(src, dst, channel)]`` the messages in
    flight, each ``(bytes, where it was sent)``."""

    def __init__(self, program: CollectiveProgram, memories: list[np.ndarray]):
        self.program, self.nodes = program, program.nodes
        self.memories = memories
        self.sram = [_sram_regions(node) for node in self.nodes]
        self.result = GoldenResult(outputs=[], memory=memories, sram=self.sram,
                                   mem_read_bytes=[0] * len(self.nodes),
                                   mem_write_bytes=[0] * len(self.nodes))
        self.fifos: dict[tuple[int, int, int], deque] = {}
        self.pc = [[0] * len(node.channels) for node in self.nodes]

    def run(self, max_steps: int | None) -> None:
        """Run every channel as far as it can, round after round, until all are done."""
        _check_steps(self.program)
        result = self.result
        total = sum(len(ch.steps) for node in self.nodes for ch in node.channels)
        while result.steps_executed < total:
            progress = False
            for n, node in enumerate(self.nodes):
                for c, channel in enumerate(node.channels):
                    while self.pc[n][c] < len(channel.steps) and self.blocked(n, c) is None:
                        self.execute(n, c)
                        progress = True
                        if max_steps is not None and result.steps_executed >= max_steps:
                            raise GoldenError(f"stopped after max_steps = {max_steps}")
            if not progress:
                raise self._deadlock(total)
        self._check_drained()

    def finish(self) -> GoldenResult:
        """The result, with every node's output read from its memory."""
        esize = DTYPE_BYTES[self.program.dtype]
        for node, memory in zip(self.nodes, self.memories):
            raw = memory[node.output_addr:node.output_addr + node.out_elems * esize]
            self.result.outputs.append(_elems(raw.copy(), self.program.dtype).copy())
        return self.result

    def blocked(self, n: int, c: int) -> str | None:
        """Why channel c of node n cannot run its next step, or None."""
        step = self.nodes[n].channels[c].steps[self.pc[n][c]]
        if step.dep is not None:
            dc, ds = step.dep
            done = self.pc[n][dc] if dc < len(self.pc[n]) else 0
            if dc >= len(self.pc[n]) or done < ds + 1:
                return (f"waits for channel {dc} to complete step {ds} "
                        f"(it has completed {done} steps)")
        if "recv" in step.uses and not self.fifos.get((step.recv_peer, n, c)):
            return f"waits for a message from node {step.recv_peer} on channel {c}"
        return None

    def region(self, n: int, buf: str, off: int, nbytes: int, where: str) -> np.ndarray:
        """The bytes of a slice: an SRAM region, or (``memory``, ``p2p``) node memory."""
        node = self.nodes[n]
        if node.mode is Mode.ACE:
            array, start = self.sram[n][buf], off
        else:
            array, start = self.memories[n], node.buffer_addr(buf) + off
        if start + nbytes > array.size:
            raise GoldenError(f"{where}: slice {buf}[{off}:+{nbytes} bytes] is out of bounds")
        return array[start:start + nbytes]

    def memory(self, n: int, step: Step, where: str) -> np.ndarray:
        """The main-memory bytes a load reads or a store writes."""
        mem, nbytes = self.memories[n], step.nbytes
        if step.mem_addr + nbytes > mem.size:
            verb = "load from" if step.type == StepType.LOAD else "store to"
            raise GoldenError(f"{where}: {verb} {step.mem_addr:#x}+{nbytes} is outside memory")
        return mem[step.mem_addr:step.mem_addr + nbytes]

    def execute(self, n: int, c: int) -> None:
        """Run the next step of channel c of node n (it is not blocked)."""
        step = self.nodes[n].channels[c].steps[self.pc[n][c]]
        where = f"node {n} channel {c} step {self.pc[n][c]} ({step.type})"
        received = self._receive(n, c, step, where) if "recv" in step.uses else None
        operand = {}
        for name in ("src", "dst"):
            if name in step.uses:
                buf, off = getattr(step, name)
                operand[name] = self.region(n, buf, off * DTYPE_BYTES[step.dtype], step.nbytes,
                                            where)
        send = self._apply(n, step, received, operand.get("src"), operand.get("dst"), where)
        if send is not None:
            self._send(n, c, step, send, where)
        read, write = step_memory_traffic(step, self.nodes[n].placement)
        self.result.mem_read_bytes[n] += read
        self.result.mem_write_bytes[n] += write
        self.pc[n][c] += 1
        self.result.steps_executed += 1

    def _apply(self, n: int, step: Step, received, src, dst, where: str) -> np.ndarray | None:
        """The step's effect on its slices and memory; returns what it sends, if anything.
        Reductions are ``received (+) src`` (rrc, rrs, rrcs) and ``src (+) dst`` (re)."""
        t = step.type
        if t == StepType.LOAD:
            dst[:] = self.memory(n, step, where)
        elif t == StepType.STORE:
            self.memory(n, step, where)[:] = src.copy()
        elif t == StepType.SEND:
            return src.copy()
        elif t == StepType.RECV:
            dst[:] = received
        elif t in (StepType.RRC, StepType.RRS, StepType.RRCS):
            value = _reduce(step, received, src)
            if t != StepType.RRS:
                dst[:] = value
            return value.copy() if t != StepType.RRC else None
        elif t == StepType.RCS:
            dst[:] = received
            return received.copy()
        elif t == StepType.CPY:
            dst[:] = src.copy()
        elif t == StepType.RE:
            dst[:] = _reduce(step, src.copy(), dst.copy())
        return None

    def _receive(self, n: int, c: int, step: Step, where: str) -> np.ndarray:
        payload, origin = self.fifos[(step.recv_peer, n, c)].popleft()
        if payload.size != step.nbytes:
            raise GoldenError(f"{where}: receives {step.nbytes} bytes but the message from "
                              f"{origin} has {payload.size} bytes")
        rx = self.result.link_rx_bytes
        rx[(n, step.recv_link)] = rx.get((n, step.recv_link), 0) + step.nbytes
        return payload

    def _send(self, n: int, c: int, step: Step, payload: np.ndarray, where: str) -> None:
        self.fifos.setdefault((n, step.send_peer, c), deque()).append((payload, where))
        tx = self.result.link_tx_bytes
        tx[(n, step.send_link)] = tx.get((n, step.send_link), 0) + step.nbytes
        self.result.messages += 1

    def _deadlock(self, total: int) -> DeadlockError:
        blocked = []
        for n, node in enumerate(self.nodes):
            for c, channel in enumerate(node.channels):
                k = self.pc[n][c]
                if k < len(channel.steps):
                    blocked.append(f"node {n} channel {c} step {k} ({channel.steps[k].type}): "
                                   f"{self.blocked(n, c)}")
        return DeadlockError(f"deadlock after {self.result.steps_executed} of {total} steps; "
                             f"blocked: " + "; ".join(blocked))

    def _check_drained(self) -> None:
        """Messages left unreceived are an error."""
        leftover = [(key, len(q)) for key, q in self.fifos.items() if q]
        if leftover:
            text = ", ".join(f"{cnt} from node {s} to node {d} on channel {c} (first sent by "
                             f"{self.fifos[(s, d, c)][0][1]})" for (s, d, c), cnt in leftover)
            raise GoldenError(f"messages never received: {text}")
