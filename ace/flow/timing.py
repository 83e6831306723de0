"""Timing reports for ``ace synth``: the worst routed paths of an ECP5 run, and the logic depth
of a generic gate netlist.

- :func:`routed_paths`: nextpnr-ecp5 reports one critical path per clock; the few next ones
  come from its routed delays (``--sdf``): a longest-path analysis over the SDF's cell delays
  (``IOPATH``, at their maximum) and wire delays (``INTERCONNECT``), from every clock-to-output
  arc to every input with a setup check (:func:`end_paths`). Its worst path is nextpnr's
  critical path (a test checks that), and the others are the worst path into each of the next
  slowest registers. :func:`failing_blocks` counts the registers that miss the clock by the
  blocks their paths run between.
- :func:`logic_depth`: the longest register-to-register path of a yosys JSON netlist mapped to
  single-output gates, in gates. Flip-flops, memories and the module's ports start and end
  paths; a memory's combinational read port counts as a mux tree, ``ceil(log2(depth))``
  levels from its address to its data.

Both name a path by its start and end register as Amaranth wrote them (``array.lane3.s3_sum``),
without the bit index and without the synthesis shell's ``dut.`` prefix.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque

__all__ = ["register_name", "distinct_paths", "end_paths", "routed_paths", "failing_blocks",
           "logic_depth", "GATES"]

#: Yosys's single-output gate cells (``abc -g`` output, plus ``$_NOT_``/``$_BUF_``).
GATES = frozenset(f"$_{g}_" for g in ("BUF", "NOT", "AND", "NAND", "OR", "NOR", "XOR", "XNOR",
                                      "ANDNOT", "ORNOT", "MUX", "NMUX", "AOI3", "OAI3", "AOI4",
                                      "OAI4"))


#: Cells of the top under the synthesis shell (:class:`~ace.flow.synth_wrapper.SerialShellWrapper`).
SHELL_PREFIX = "dut."


def register_name(cell: str, role: str = "from") -> str:
    """The Amaranth signal of a register cell of the top in its shell: ``dut.x.y_TRELLIS_FF_Q_3``
    -> ``x.y`` (and a LUT RAM's ``dut.q.storage.0.12$DPRAM_COMB3`` -> ``q.storage.0.12``). The
    shell's own registers stand for the top's ports: ``<inputs>`` at the start of a path
    (``role`` ``from``), ``<outputs>`` at its end."""
    if not cell.startswith(SHELL_PREFIX):
        return "<inputs>" if role == "from" else "<outputs>"
    return re.sub(r"(_TRELLIS_FF_Q(_\d+)?|\$[A-Z0-9_]+)$", "", cell.removeprefix(SHELL_PREFIX))


def distinct_paths(paths: list[dict], count: int) -> list[dict]:
    """The first ``count`` paths of different shape, each with ``alike``: how many of the others
    differ from it only in their numbers (``lane3`` for ``lane0``: the same logic replicated)."""
    shapes: dict[str, dict] = {}
    for path in paths:
        shape = re.sub(r"\d+", "#", f"{path['from']} -> {path['to']}")
        if shape in shapes:
            shapes[shape]["alike"] += 1
        else:
            shapes[shape] = {**path, "alike": 0}
    return list(shapes.values())[:count]


# --- routed paths (SDF) ----------------------------------------------------------------------

_TRIPLE = r"\(([-\d.]*):([-\d.]*):([-\d.]*)\)"
_INSTANCE = re.compile(r"\(INSTANCE (.*)\)")
_WIRE = re.compile(r"\(INTERCONNECT (\S+) (\S+) " + _TRIPLE)
_ARC = re.compile(r"\(IOPATH (?:\(\w+ )?(\w+)\)? (\w+) " + _TRIPLE)
_SETUP = re.compile(r"\(SETUP(?:HOLD)? \((?:\w+ )?(\w+)\) \((?:\w+ )?(\w+)\) " + _TRIPLE)


def _unescape(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


def _pin(token: str) -> tuple[str, str]:
    instance, _, pin = token.rpartition("/")
    return _unescape(instance), pin


def _ps(match: re.Match) -> int:
    return round(float(match[match.re.groups] or 0))  # the max of (min:typ:max)


def _read_sdf(text: str):
    """(cell arcs, wires, setup checks, clock pins) of nextpnr's SDF (one item a line)."""
    arcs, wires, setups = [], [], []
    clocks: set[tuple[str, str]] = set()
    instance = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("(INTERCONNECT"):
            match = _WIRE.match(line)
            wires.append((_pin(match[1]), _pin(match[2]), _ps(match)))
        elif line.startswith("(IOPATH"):
            match = _ARC.match(line)
            arcs.append(((instance, match[1]), (instance, match[2]), _ps(match)))
        elif line.startswith("(SETUP"):
            match = _SETUP.match(line)
            setups.append(((instance, match[1]), _ps(match)))  # SETUPHOLD: setup first
            clocks.add((instance, match[2]))
        elif line.startswith("(INSTANCE"):
            instance = _unescape(_INSTANCE.match(line)[1].strip())
    return arcs, wires, setups, clocks


def routed_paths(sdf_text: str, count: int = 5) -> list[dict]:
    """The worst register-to-register paths of a top routed in its shell, the first ``count``
    of different shape (:func:`distinct_paths` of :func:`end_paths`)."""
    return distinct_paths(end_paths(sdf_text), count)


def failing_blocks(paths: list[dict], period_ns: float, count: int = 10) -> list[dict]:
    """The end registers whose worst path (of :func:`end_paths`) is longer than ``period_ns``,
    counted by the blocks the path runs between (a register's block: the first part of its
    name, ``ch0`` of ``ch0.datapath.active``; a port: ``<inputs>``, ``<outputs>``), the
    ``count`` pairs with the most first: ``from``, ``to``, ``registers``, ``worst_ns``. It
    tells whether a top misses its clock on a few paths or on many, and where."""
    pairs: dict[tuple, dict] = {}
    for path in paths:
        if path["delay_ns"] > period_ns:
            key = (path["from"].split(".")[0], path["to"].split(".")[0])
            pair = pairs.setdefault(key, {"from": key[0], "to": key[1], "registers": 0,
                                          "worst_ns": path["delay_ns"]})
            pair["registers"] += 1
            pair["worst_ns"] = max(pair["worst_ns"], path["delay_ns"])
    return sorted(pairs.values(), key=lambda p: (-p["registers"], -p["worst_ns"]))[:count]


def end_paths(sdf_text: str) -> list[dict]:
    """The worst path into each end register of a top routed in its shell, worst first: start,
    end, delay (ns, clock-to-output and setup included), logic levels (cell arcs crossed, as
    nextpnr counts them) and the share of the delay spent in routing. Paths between two of the
    shell's registers are left out."""
    arcs, wires, setups, clocks = _read_sdf(sdf_text)
    edges = defaultdict(list)  # pin -> [(next pin, delay, is a cell arc)]
    arrival: dict = {}  # pin -> (delay in ps, logic levels): the latest, then the deepest
    previous: dict = {}
    for source, sink, delay in arcs:
        if source in clocks:  # clock-to-output: a path starts here
            if (delay, 0) > arrival.get(sink, (-1, 0)):
                arrival[sink], previous[sink] = (delay, 0), None
        else:
            edges[source].append((sink, delay, True))
    for source, sink, delay in wires:
        if sink not in clocks:
            edges[source].append((sink, delay, False))
    _longest(edges, arrival, previous)
    ends = {}
    for pin, setup in setups:
        if pin in arrival:
            total = (arrival[pin][0] + setup, arrival[pin][1])
            name = register_name(pin[0], "to")
            if total > ends.get(name, ((-1, 0),))[0]:
                ends[name] = (total, pin)
    paths = [_describe(total, pin, previous)
             for (total, _), pin in sorted(ends.values(), key=lambda end: end[0], reverse=True)]
    return [p for p in paths if not (p["from"].startswith("<") and p["to"].startswith("<"))]


def _longest(edges, arrival, previous):
    """The latest arrival at every pin reachable from the seeded ones (Kahn order); of equal
    arrivals the one through more cell arcs (nextpnr's SDF gives a LUT and the wide-function
    mux after it as one arc as well as two)."""
    indegree = defaultdict(int)
    for successors in edges.values():
        for sink, _, _ in successors:
            indegree[sink] += 1
    ready = deque(pin for pin in set(edges) | set(arrival) if indegree[pin] == 0)
    while ready:
        pin = ready.popleft()
        for sink, delay, via_cell in edges.get(pin, ()):
            if pin in arrival:
                reached = (arrival[pin][0] + delay, arrival[pin][1] + via_cell)
                if reached > arrival.get(sink, (-1, 0)):
                    arrival[sink], previous[sink] = reached, (pin, delay, via_cell)
            indegree[sink] -= 1
            if indegree[sink] == 0:
                ready.append(sink)


def _describe(total, end, previous) -> dict:
    levels, routing, pin = 0, 0, end
    while previous.get(pin):
        pin, delay, via_cell = previous[pin]
        levels += via_cell
        routing += 0 if via_cell else delay
    return {"from": register_name(pin[0]), "to": register_name(end[0], "to"),
            "delay_ns": round(total / 1000, 2), "logic_levels": levels,
            "routing_share": round(routing / total, 2) if total else 0.0}


# --- logic depth (generic gate netlist) ------------------------------------------------------


_FLIP_FLOPS = ("$_DFF", "$_SDFF", "$_ALDFF", "$_DLATCH")  # and their E, SR, CE forms


def _parameter(value) -> int:
    return value if isinstance(value, int) else int(value, 2)


def _combinational_arcs(cell: dict):
    """(input bits, output bits, levels) of each combinational arc of a cell: one for a gate,
    one per combinational read port of a memory (its mux tree), none for a register."""
    connections = cell["connections"]
    if cell["type"] in GATES:
        directions = cell["port_directions"]
        inputs = [b for port, bits in connections.items() if directions[port] == "input"
                  for b in bits]
        outputs = [b for port, bits in connections.items() if directions[port] == "output"
                   for b in bits]
        return [(inputs, outputs, 1)]
    if cell["type"] != "$mem_v2":
        return []
    parameters = cell["parameters"]
    abits, width = _parameter(parameters["ABITS"]), _parameter(parameters["WIDTH"])
    clocked = parameters["RD_CLK_ENABLE"]
    clocked = format(clocked, "b") if isinstance(clocked, int) else clocked
    levels = max(1, math.ceil(math.log2(max(_parameter(parameters["SIZE"]), 2))))
    arcs = []
    for port in range(_parameter(parameters["RD_PORTS"])):
        if clocked.rjust(port + 1, "0")[-1 - port] == "0":
            arcs.append((connections["RD_ADDR"][port * abits:(port + 1) * abits],
                         connections["RD_DATA"][port * width:(port + 1) * width], levels))
    return arcs


def _bit_names(module: dict) -> dict:
    """Bit -> the signal it belongs to: a visible name, the innermost module's first."""
    names: dict = {}
    ranked = sorted(module["netnames"].items(),
                    key=lambda item: (item[1].get("hide_name", 0), -item[0].count("."),
                                      item[0]))
    for name, net in ranked:
        for bit in net["bits"]:
            names.setdefault(bit, name)
    return names


def logic_depth(netlist: dict, top: str, count: int = 5) -> dict:
    """``logic_levels`` (the most gates between two registers), the worst paths (one per end
    register, deepest first), and the counts of gates, flip-flops, memories, memory bits and
    ``cells`` by type, of module ``top`` of a flattened yosys JSON netlist mapped to
    :data:`GATES`. Ports stand for registers outside."""
    module = netlist["modules"][top]
    names = _bit_names(module)
    arcs, ends = [], []  # ends: (bit, the register it enters)
    cells: dict[str, int] = defaultdict(int)
    memory_bits = 0
    for cell_name, cell in module["cells"].items():
        cell_arcs = _combinational_arcs(cell)
        arcs += cell_arcs
        cells[cell["type"]] += 1
        if cell["type"] in GATES:
            continue
        if cell["type"] == "$mem_v2":
            memory_bits += (_parameter(cell["parameters"]["SIZE"])
                            * _parameter(cell["parameters"]["WIDTH"]))
        # A register or memory: its inputs end paths, named by what it holds.
        directions = cell.get("port_directions", {})
        outputs = [b for port, bits in cell["connections"].items()
                   if directions.get(port) == "output" for b in bits]
        held = (names.get(outputs[0]) if cell["type"] != "$mem_v2" and outputs
                else str(cell.get("parameters", {}).get("MEMID", cell_name)).lstrip("\\"))
        through = {b for inputs, _, _ in cell_arcs for b in inputs}
        ends += [(b, held) for port, bits in cell["connections"].items()
                 if directions.get(port) == "input" for b in bits if b not in through]
    for name, port in module["ports"].items():
        for bit in port["bits"]:
            if port["direction"] == "input":
                names[bit] = f"<input {name}>"
            else:
                ends.append((bit, f"<output {name}>"))
    level, origin = _levels(arcs)
    worst: dict = {}
    for bit, end in ends:
        depth = level.get(bit, 0)
        if isinstance(bit, int) and depth > worst.get(end, (0,))[0]:
            worst[end] = (depth, bit)
    deepest = sorted(worst.items(), key=lambda item: (-item[1][0], item[0]))
    paths = distinct_paths([{"from": names.get(origin.get(bit, bit), "<constant>"), "to": end,
                             "logic_levels": depth} for end, (depth, bit) in deepest], count)
    return {"gates": sum(n for cell, n in cells.items() if cell in GATES),
            "ffs": sum(n for cell, n in cells.items() if cell.startswith(_FLIP_FLOPS)),
            "memories": cells.get("$mem_v2", 0), "memory_bits": memory_bits,
            "logic_levels": paths[0]["logic_levels"] if paths else 0, "worst_paths": paths,
            "cells": dict(sorted(cells.items()))}


def _levels(arcs):
    """Longest level at every driven bit (Kahn order over the arcs) and the bit its deepest
    path starts from."""
    driver = {}
    for index, (_, outputs, _) in enumerate(arcs):
        for bit in outputs:
            driver[bit] = index
    waiting = [sum(isinstance(b, int) and b in driver for b in inputs) for inputs, _, _ in arcs]
    readers = defaultdict(list)
    for index, (inputs, _, _) in enumerate(arcs):
        for bit in inputs:
            if isinstance(bit, int) and bit in driver:
                readers[bit].append(index)
    level, origin = {}, {}
    ready = deque(index for index, n in enumerate(waiting) if n == 0)
    while ready:
        inputs, outputs, weight = arcs[ready.popleft()]
        source = max((b for b in inputs if isinstance(b, int)), default=None,
                     key=lambda b: level.get(b, 0))
        for bit in outputs:
            level[bit] = level.get(source, 0) + weight
            origin[bit] = origin.get(source, source)
            for reader in readers[bit]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    ready.append(reader)
    return level, origin
