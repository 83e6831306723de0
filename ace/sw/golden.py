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
  ``memory`` placement: buffers ``i``/``o``/``s`` are the node's memory at ``input_addr``,
  ``output_addr``, ``scratch_addr``.

When no channel can make progress before all are done, :class:`DeadlockError` lists every
blocked step and what it waits for. Messages left unreceived at the end are an error too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ace.layouts import DTYPE_BYTES
from ace.numerics import BITS_DTYPE, NP_DTYPE, reduce_elements, to_bits
from ace.sw.program import (CollectiveProgram, ProgramError, node_memory_size,
                            step_memory_traffic)

__all__ = ["GoldenError", "DeadlockError", "GoldenResult", "run", "place_inputs"]


class GoldenError(RuntimeError):
    """The program cannot run: bad message match, out-of-bounds slice, leftover messages."""


class DeadlockError(GoldenError):
    """No channel can make progress; the message lists the blocked steps."""


@dataclass
class GoldenResult:
    outputs: list[np.ndarray]                 # per node: out_elems elements at output_addr
    memory: list[np.ndarray]                  # per node: the memory image (uint8)
    sram: list[dict[str, np.ndarray]]         # per node: SRAM regions (uint8), sram placement
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
    memories = place_inputs(program, inputs)
    nodes = program.nodes
    sram: list[dict[str, np.ndarray]] = []
    for node in nodes:
        extent = {"i": 0, "o": 0, "s": 0}
        if node.placement == "sram":
            for channel in node.channels:
                for step in channel.steps:
                    for name in ("src", "dst"):
                        if name in step.uses:
                            buf, off = getattr(step, name)
                            extent[buf] = max(extent[buf],
                                              (off + step.count) * DTYPE_BYTES[step.dtype])
        sram.append({b: np.zeros(n, dtype=np.uint8) for b, n in extent.items()})

    result = GoldenResult(outputs=[], memory=memories, sram=sram,
                          mem_read_bytes=[0] * len(nodes), mem_write_bytes=[0] * len(nodes))
    fifos: dict[tuple[int, int, int], deque] = {}
    pc = [[0] * len(node.channels) for node in nodes]

    def region(n: int, buf: str, off: int, nbytes: int, where: str) -> np.ndarray:
        node = nodes[n]
        if node.placement == "sram":
            array, start = sram[n][buf], off
        else:
            array, start = memories[n], node.buffer_addr(buf) + off
        if start + nbytes > array.size:
            raise GoldenError(f"{where}: slice {buf}[{off}:+{nbytes} bytes] is out of bounds")
        return array[start:start + nbytes]

    def elems(raw: np.ndarray, dtype) -> np.ndarray:
        return raw.view(BITS_DTYPE[dtype].newbyteorder("<")).astype(BITS_DTYPE[dtype]) \
                  .view(NP_DTYPE[dtype])

    def raw_of(values: np.ndarray, dtype) -> np.ndarray:
        bits = to_bits(dtype, values)
        return np.frombuffer(bits.astype(bits.dtype.newbyteorder("<")).tobytes(), np.uint8)

    def blocked_reason(n: int, c: int) -> str | None:
        step = nodes[n].channels[c].steps[pc[n][c]]
        if step.dep is not None:
            dc, ds = step.dep
            done = pc[n][dc] if dc < len(pc[n]) else 0
            if dc >= len(pc[n]) or done < ds + 1:
                return (f"waits for channel {dc} to complete step {ds} "
                        f"(it has completed {done} steps)")
        if "recv" in step.uses:
            key = (step.recv_peer, n, c)
            if not fifos.get(key):
                return f"waits for a message from node {step.recv_peer} on channel {c}"
        return None

    def execute(n: int, c: int) -> None:
        node = nodes[n]
        step = node.channels[c].steps[pc[n][c]]
        where = f"node {n} channel {c} step {pc[n][c]} ({step.type})"
        nbytes, dtype = step.nbytes, step.dtype
        received = None
        if "recv" in step.uses:
            payload, origin = fifos[(step.recv_peer, n, c)].popleft()
            if payload.size != nbytes:
                raise GoldenError(f"{where}: receives {nbytes} bytes but the message from "
                                  f"{origin} has {payload.size} bytes")
            received = payload
            result.link_rx_bytes[(n, step.recv_link)] = \
                result.link_rx_bytes.get((n, step.recv_link), 0) + nbytes
        src = None
        if "src" in step.uses:
            buf, off = step.src
            src = region(n, buf, off * DTYPE_BYTES[dtype], nbytes, where)
        dst = None
        if "dst" in step.uses:
            buf, off = step.dst
            dst = region(n, buf, off * DTYPE_BYTES[dtype], nbytes, where)
        send = None
        t = step.type
        if t == "load":
            mem = memories[n]
            if step.mem_addr + nbytes > mem.size:
                raise GoldenError(f"{where}: load from {step.mem_addr:#x}+{nbytes} is outside "
                                  "memory")
            dst[:] = mem[step.mem_addr:step.mem_addr + nbytes]
        elif t == "store":
            mem = memories[n]
            if step.mem_addr + nbytes > mem.size:
                raise GoldenError(f"{where}: store to {step.mem_addr:#x}+{nbytes} is outside "
                                  "memory")
            mem[step.mem_addr:step.mem_addr + nbytes] = src.copy()
        elif t == "s":
            send = src.copy()
        elif t == "r":
            dst[:] = received
        elif t in ("rrc", "rrs", "rrcs"):
            value = raw_of(reduce_elements(step.op, dtype, elems(received, dtype),
                                           elems(src, dtype)), dtype)
            if t != "rrs":
                dst[:] = value
            if t != "rrc":
                send = value.copy()
        elif t == "rcs":
            dst[:] = received
            send = received.copy()
        elif t == "cpy":
            dst[:] = src.copy()
        elif t == "re":
            dst[:] = raw_of(reduce_elements(step.op, dtype, elems(src.copy(), dtype),
                                            elems(dst.copy(), dtype)), dtype)
        if send is not None:
            key = (n, step.send_peer, c)
            fifos.setdefault(key, deque()).append((send, where))
            result.link_tx_bytes[(n, step.send_link)] = \
                result.link_tx_bytes.get((n, step.send_link), 0) + nbytes
            result.messages += 1
        read, write = step_memory_traffic(step, node.placement)
        result.mem_read_bytes[n] += read
        result.mem_write_bytes[n] += write
        pc[n][c] += 1
        result.steps_executed += 1

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

    total = sum(len(ch.steps) for node in nodes for ch in node.channels)
    while result.steps_executed < total:
        progress = False
        for n, node in enumerate(nodes):
            for c, channel in enumerate(node.channels):
                while pc[n][c] < len(channel.steps) and blocked_reason(n, c) is None:
                    execute(n, c)
                    progress = True
                    if max_steps is not None and result.steps_executed >= max_steps:
                        raise GoldenError(f"stopped after max_steps = {max_steps}")
        if not progress:
            blocked = []
            for n, node in enumerate(nodes):
                for c, channel in enumerate(node.channels):
                    if pc[n][c] < len(channel.steps):
                        step = channel.steps[pc[n][c]]
                        blocked.append(f"node {n} channel {c} step {pc[n][c]} ({step.type}): "
                                       f"{blocked_reason(n, c)}")
            raise DeadlockError(f"deadlock after {result.steps_executed} of {total} steps; "
                                f"blocked: " + "; ".join(blocked))
    leftover = [(key, len(q)) for key, q in fifos.items() if q]
    if leftover:
        text = ", ".join(f"{cnt} from node {s} to node {d} on channel {c} (first sent by "
                         f"{fifos[(s, d, c)][0][1]})" for (s, d, c), cnt in leftover)
        raise GoldenError(f"messages never received: {text}")

    esize = DTYPE_BYTES[program.dtype]
    for n, node in enumerate(nodes):
        raw = memories[n][node.output_addr:node.output_addr + node.out_elems * esize]
        result.outputs.append(elems(raw.copy(), program.dtype).copy())
    return result
