"""MSCCL XML algorithms -> :class:`~ace.sw.program.CollectiveProgram`.

Format (MSCCL / msccl-tools)::

    <algo name proto nchannels nchunksperloop ngpus coll inplace>
      <gpu id i_chunks o_chunks s_chunks>
        <tb id send recv chan>
          <step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>

* ``type``: s, r, rrc, rrs, rrcs, rcs, cpy, re, nop (same meaning as ACE steps; ``rrc`` keeps
  ``recv (+) src`` in ``dst``, ``re`` is ``dst = dst (+) src``);
* buffers ``i``/``o``/``s`` (also ``input``/``output``/``scratch``); offsets and counts are in
  chunks of ``chunk_elems`` elements;
* ``depid``/``deps``: the step waits until step ``deps`` of threadblock ``depid`` (same gpu) is
  done; several dependencies may be given as comma-separated lists of equal length. ACE has one
  dependency per instruction, so each extra dependency becomes a ``nop`` step before the step;
* ``inplace="1"`` with ``o_chunks="0"``: the output is the input buffer (``o`` aliases ``i``).

Threadblocks map to sequencer channels. The NIC delivers channel c's packets to channel c, so a
sending threadblock and its receiving threadblock (same ``chan``, matching ``send``/``recv``)
get the same channel index; the importer solves these constraints (union-find, then a greedy
assignment keeping each gpu's threadblocks on distinct channels) and raises an error if they
cannot be met.

Loops: as the MSCCL runtime does, a buffer larger than one pass of the algorithm is processed in
``loops`` passes; pass k covers elements ``[k*L, (k+1)*L)`` of every buffer (L = the buffer's
chunks x ``chunk_elems``), and its steps follow pass k-1's on every channel. In ``ace`` mode each
pass loads its slice into the same SRAM region and stores its result, so one pass must fit the
SRAM and the SRAM's size, not the buffer's, bounds the collective.

In ``ace`` mode the importer adds a ``load`` of the whole input at the start of channel 0
(every other channel's first step depends on it) and a ``store`` of the output at the end of
channel 0 (after ``nop``\\ s that wait for every other channel's last step). In ``baseline`` mode
buffers are placed in memory and no load/store is added.

Errors (:class:`MscclError`) name the file, the line and the attribute.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

from ace.layouts import DTYPE_BYTES
from ace.sw.program import (Channel, CollectiveProgram, NodeProgram, ProgramError, Step, Topology,
                      dtype_from_name, op_from_name)

__all__ = ["MscclError", "load_msccl", "parse_msccl"]


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
            allowed = f"{low if low is not None else '-inf'} to {high if high is not None else 'inf'}"
            raise self.err(element, name, f"{value} is out of range; allowed: {allowed}")
        return value

    def int_list(self, element, name) -> list[int]:
        text = element.attrib.get(name, "-1")
        try:
            return [int(v) for v in text.split(",")]
        except ValueError:
            raise self.err(element, name, f"{text!r} is not an integer or a comma-separated "
                           "list of integers") from None


_BUFS = {"i": "i", "o": "o", "s": "s", "input": "i", "output": "o", "scratch": "s"}
_COLLS = {"allreduce": "allreduce", "reduce_scatter": "reduce_scatter",
          "reducescatter": "reduce_scatter", "allgather": "allgather", "alltoall": "alltoall",
          "custom": "custom"}
_STEP_TYPES = ("s", "r", "rrc", "rrs", "rrcs", "rcs", "cpy", "re", "nop")
_USES = {"s": ("src", "send"), "r": ("dst", "recv"), "rrc": ("src", "dst", "recv"),
         "rrs": ("src", "recv", "send"), "rrcs": ("src", "dst", "recv", "send"),
         "rcs": ("dst", "recv", "send"), "cpy": ("src", "dst"), "re": ("src", "dst"),
         "nop": ()}


def load_msccl(path_or_text, *, chunk_elems: int | None = None, count: int | None = None,
               loops: int = 1, dtype="int32", op="sum", mode: str = "ace", topology=None,
               input_addr: int = 0, output_addr: int | None = None,
               scratch_addr: int | None = None, source: str | None = None
               ) -> CollectiveProgram:
    """Read an MSCCL XML algorithm (a path, or the XML text itself) into a program.

    ``chunk_elems``: elements per MSCCL chunk; or ``count``: elements in all ``loops`` passes
    (``loops * nchunksperloop`` chunks), which must divide evenly. ``topology`` (default
    ``switch:ngpus``) gives the link of every peer.
    """
    if isinstance(path_or_text, Path) or (isinstance(path_or_text, str)
                                           and not path_or_text.lstrip().startswith("<")):
        path = Path(path_or_text)
        try:
            text = path.read_text()
        except OSError as error:
            raise MscclError(f"{path}: cannot read: {error.strerror}") from None
        source = source or str(path)
    else:
        text = path_or_text
        source = source or "<xml>"
    rd = _Reader(source)
    root = parse_msccl(text, source)
    if root.tag != "algo":
        raise rd.err(root, None, "the root element must be <algo>")
    ngpus = rd.int_attr(root, "ngpus", low=1, high=256)
    nchunks = rd.int_attr(root, "nchunksperloop", low=1)
    rd.int_attr(root, "nchannels", default=1, low=1)
    inplace = rd.int_attr(root, "inplace", default=0, low=0, high=1)
    coll_text = root.attrib.get("coll", "custom").lower()
    if coll_text not in _COLLS:
        raise rd.err(root, "coll", f"{coll_text!r}; allowed: {', '.join(_COLLS)}")
    if chunk_elems is None:
        if count is None:
            raise MscclError(f"{source}: give chunk_elems= or count=")
        if not isinstance(loops, int) or loops < 1:
            raise MscclError(f"{source}: loops {loops!r}; allowed: an integer >= 1")
        if count % (nchunks * loops):
            raise MscclError(f"{source}: count {count} is not a multiple of "
                             f"nchunksperloop x loops = {nchunks} x {loops}")
        chunk_elems = count // (nchunks * loops)
    if chunk_elems < 1:
        raise MscclError(f"{source}: chunk_elems {chunk_elems}; allowed: at least 1")
    dtype, op = dtype_from_name(dtype), op_from_name(op)
    esize = DTYPE_BYTES[dtype]
    if isinstance(topology, str):
        topology = Topology.parse(topology)
    topology = topology or Topology.switch(ngpus)
    if topology.num_nodes != ngpus:
        raise MscclError(f"{source}: topology {topology} has {topology.num_nodes} nodes; the "
                         f"algorithm has ngpus = {ngpus}")

    # -- read gpus, threadblocks and steps ---------------------------------------------------
    gpus: dict[int, dict] = {}
    for gpu_el in root.children:
        if gpu_el.tag != "gpu":
            raise rd.err(gpu_el, None, "expected <gpu> inside <algo>")
        g = rd.int_attr(gpu_el, "id", low=0, high=ngpus - 1)
        if g in gpus:
            raise rd.err(gpu_el, "id", f"gpu {g} is defined twice")
        sizes = {"i": rd.int_attr(gpu_el, "i_chunks", default=0, low=0),
                 "o": rd.int_attr(gpu_el, "o_chunks", default=0, low=0),
                 "s": rd.int_attr(gpu_el, "s_chunks", default=0, low=0)}
        alias_o = bool(inplace) and sizes["o"] == 0
        tbs = {}
        for tb_el in gpu_el.children:
            if tb_el.tag != "tb":
                raise rd.err(tb_el, None, "expected <tb> inside <gpu>")
            t = rd.int_attr(tb_el, "id", low=0)
            if t in tbs:
                raise rd.err(tb_el, "id", f"threadblock {t} is defined twice on gpu {g}")
            send = rd.int_attr(tb_el, "send", default=-1, low=-1, high=ngpus - 1)
            recv = rd.int_attr(tb_el, "recv", default=-1, low=-1, high=ngpus - 1)
            chan = rd.int_attr(tb_el, "chan", default=0, low=0)
            for name, peer in (("send", send), ("recv", recv)):
                if peer == g:
                    raise rd.err(tb_el, name, f"peer {peer} is the gpu itself")
            steps = []
            for k, st in enumerate(tb_el.children):
                if st.tag != "step":
                    raise rd.err(st, None, "expected <step> inside <tb>")
                s_index = rd.int_attr(st, "s", low=0)
                if s_index != k:
                    raise rd.err(st, "s", f"{s_index}; steps must be numbered 0, 1, ... in "
                                 f"order (expected {k})")
                typ = st.attrib.get("type")
                if typ not in _STEP_TYPES:
                    raise rd.err(st, "type", f"{typ!r} is not a step type; allowed: "
                                 f"{', '.join(_STEP_TYPES)}")
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
                        raise rd.err(st, f"{side}buf", f"{buf_text!r}; allowed: i, o, s")
                    buf = _BUFS[buf_text]
                    off = rd.int_attr(st, f"{side}off", low=0)
                    limit = sizes["i"] if (buf == "o" and alias_o) else sizes[buf]
                    if off + cnt > limit:
                        raise rd.err(st, f"{side}off", f"chunks {off}..{off + cnt - 1} of buffer "
                                     f"{buf} are out of range; gpu {g} has {limit} "
                                     f"{buf}-chunks")
                    if buf == "o" and alias_o:
                        buf = "i"
                    slices[side] = (buf, off * chunk_elems)
                for side, peer in (("send", send), ("recv", recv)):
                    if side in uses and peer < 0:
                        raise rd.err(st, "type", f"{typ} {'sends' if side == 'send' else 'receives'}"
                                     f" but threadblock {t} has no {side} peer")
                depids = rd.int_list(st, "depid")
                depsteps = rd.int_list(st, "deps")
                if len(depids) != len(depsteps):
                    raise rd.err(st, "deps", f"{len(depsteps)} entries for {len(depids)} in "
                                 "depid")
                deps = []
                for d_tb, d_step in zip(depids, depsteps):
                    if d_tb < 0:
                        continue
                    if d_step < 0:
                        raise rd.err(st, "deps", f"{d_step}: a dependency on threadblock "
                                     f"{d_tb} needs a step index >= 0")
                    deps.append((d_tb, d_step, st))
                rd.int_attr(st, "hasdep", default=0, low=0, high=1)
                step = Step(type=typ, count=cnt * chunk_elems if typ != "nop" else 0,
                            src=slices.get("src"), dst=slices.get("dst"), dtype=dtype, op=op)
                if "send" in uses:
                    step.send_peer = send
                    step.send_link = topology.send_link(g, send)
                if "recv" in uses:
                    step.recv_peer = recv
                    step.recv_link = topology.recv_link(g, recv)
                steps.append((step, deps))
            tbs[t] = {"send": send, "recv": recv, "chan": chan, "steps": steps, "el": tb_el}
        gpus[g] = {"sizes": sizes, "alias_o": alias_o, "tbs": tbs, "el": gpu_el}
    for g in range(ngpus):
        if g not in gpus:
            raise rd.err(root, "ngpus", f"{ngpus} gpus declared but gpu {g} is missing")
    # Dependencies must name existing steps.
    for g, gpu in gpus.items():
        for t, tb in gpu["tbs"].items():
            for step, deps in tb["steps"]:
                for d_tb, d_step, st in deps:
                    if d_tb not in gpu["tbs"]:
                        raise rd.err(st, "depid", f"threadblock {d_tb} does not exist on gpu {g}")
                    if d_step >= len(gpu["tbs"][d_tb]["steps"]):
                        raise rd.err(st, "deps", f"threadblock {d_tb} on gpu {g} has no step "
                                     f"{d_step}")

    channel_of = _assign_channels(gpus, rd)

    # -- lower to channels ---------------------------------------------------------------------
    nodes = []
    for g in range(ngpus):
        gpu = gpus[g]
        sizes = gpu["sizes"]
        in_elems = sizes["i"] * chunk_elems            # one pass; the buffers hold `loops`
        out_elems = in_elems if gpu["alias_o"] else sizes["o"] * chunk_elems
        ia = input_addr
        oa = output_addr if output_addr is not None else _align(ia + loops * in_elems * esize)
        if gpu["alias_o"] and mode == "baseline":
            oa = ia
        sa = (scratch_addr if scratch_addr is not None
              else _align(oa + loops * out_elems * esize))
        node = NodeProgram(node=g, placement="sram" if mode == "ace" else "memory",
                           input_addr=ia, output_addr=oa, scratch_addr=sa,
                           in_elems=loops * in_elems, out_elems=loops * out_elems,
                           scratch_elems=loops * sizes["s"] * chunk_elems)
        width = max([channel_of[(g, t)] for t in gpu["tbs"]] + [-1]) + 1
        width = max(width, 1)
        # Entries: (Step, [dependency refs]); refs are ("tb", t, s) or ("load",) or
        # ("last", channel).
        lists: list[list] = [[] for _ in range(width)]
        tb_at = {channel_of[(g, t)]: t for t in gpu["tbs"]}
        if mode == "ace" and in_elems:
            lists[0].append((Step(type="load", count=in_elems, dst=("i", 0), dtype=dtype, op=op,
                                  mem_addr=ia), [], ("load",)))
        for c in range(width):
            t = tb_at.get(c)
            if t is None:
                continue
            tb = gpu["tbs"][t]
            for s_index, (step, deps) in enumerate(tb["steps"]):
                refs = [("tb", d_tb, d_step) for d_tb, d_step, _ in deps if d_tb != t]
                lists[c].append((step, refs, ("tb", t, s_index)))
        if mode == "ace" and in_elems:
            for c in range(1, width):
                if lists[c]:
                    step, refs, key = lists[c][0]
                    lists[c][0] = (step, refs + [("load",)], key)
        if mode == "ace" and out_elems:
            last_refs = [("last", c) for c in range(1, width) if lists[c]]
            src_buf = "i" if gpu["alias_o"] else "o"
            lists[0].append((Step(type="store", count=out_elems, src=(src_buf, 0), dtype=dtype,
                                  op=op, mem_addr=oa), last_refs, ("store",)))
        # Expand multiple dependencies into nops, then number the steps.
        expanded: list[list] = []
        for c in range(width):
            out = []
            for step, refs, key in lists[c]:
                for ref in refs[:-1]:
                    out.append((Step(type="nop", dtype=dtype, op=op), ref, None))
                out.append((step, refs[-1] if refs else None, key))
            expanded.append(out)
        index = {}
        for c, entries in enumerate(expanded):
            for k, (_, _, key) in enumerate(entries):
                if key is not None:
                    index[key] = (c, k)
        for c, entries in enumerate(expanded):
            steps = []
            for step, ref, key in entries:
                step = Step(**{f: getattr(step, f) for f in step.__dataclass_fields__})
                if ref is not None:
                    if ref[0] == "last":
                        step.dep = (ref[1], len(expanded[ref[1]]) - 1)
                    else:
                        step.dep = index[ref]
                steps.append(step)
            ch = Channel(steps=steps)
            t = tb_at.get(c)
            if t is not None:
                tb = gpu["tbs"][t]
                if tb["send"] >= 0:
                    ch.send_peer, ch.send_link = tb["send"], topology.send_link(g, tb["send"])
                if tb["recv"] >= 0:
                    ch.recv_peer, ch.recv_link = tb["recv"], topology.recv_link(g, tb["recv"])
            node.channels.append(ch)
        nodes.append(node)
    width = max(len(n.channels) for n in nodes)
    for n in nodes:
        n.channels += [Channel() for _ in range(width - len(n.channels))]
        if loops > 1:
            _repeat(n, loops, mode, esize, {g: gpus[n.node]["sizes"][g] * chunk_elems
                                            for g in "ios"}, gpus[n.node]["alias_o"])
    count_elems = nodes[0].in_elems if coll_text != "allgather" else nodes[0].out_elems
    program = CollectiveProgram(collective=_COLLS[coll_text],
                                algorithm=f"msccl:{root.attrib.get('name', 'unnamed')}",
                                dtype=dtype, op=op, count=count_elems, nodes=nodes,
                                topology=topology, mode=mode, chunks=1)
    program.validate()
    return program


def _repeat(node: NodeProgram, loops: int, mode: str, esize: int, per_pass: dict,
            alias_o: bool) -> None:
    """Make ``node``'s one-pass program run ``loops`` passes (see the module docstring)."""
    per_pass = dict(per_pass)
    if alias_o:
        per_pass["o"] = per_pass["i"]
    lengths = [len(ch.steps) for ch in node.channels]
    for ch in node.channels:
        one = ch.steps
        ch.steps = []
        for k in range(loops):
            for step in one:
                step = Step(**{f: getattr(step, f) for f in step.__dataclass_fields__})
                if step.dep is not None:
                    step.dep = (step.dep[0], step.dep[1] + k * lengths[step.dep[0]])
                if mode == "ace":
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


def _assign_channels(gpus: dict, rd: _Reader) -> dict[tuple[int, int], int]:
    """Channel index of every (gpu, tb): connected threadblocks share an index, threadblocks of
    one gpu get distinct indices."""
    parent = {}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g, gpu in gpus.items():
        for t in gpu["tbs"]:
            parent[(g, t)] = (g, t)
    for g, gpu in gpus.items():
        for t, tb in gpu["tbs"].items():
            if tb["send"] < 0:
                continue
            peer = gpus[tb["send"]]
            match = [u for u, other in peer["tbs"].items()
                     if other["recv"] == g and other["chan"] == tb["chan"]]
            if not match:
                raise rd.err(tb["el"], "send", f"gpu {g} threadblock {t} sends to gpu "
                             f"{tb['send']} on chan {tb['chan']}, but no threadblock there "
                             f"receives from gpu {g} on chan {tb['chan']}")
            if len(match) > 1:
                raise rd.err(tb["el"], "send", f"several threadblocks of gpu {tb['send']} "
                             f"receive from gpu {g} on chan {tb['chan']}")
            parent[find((g, t))] = find((tb["send"], match[0]))
    groups: dict = {}
    for key in parent:
        groups.setdefault(find(key), []).append(key)
    assignment = {}
    used_by_gpu: dict[int, set] = {}
    for members in sorted(groups.values(), key=lambda m: min(m)):
        gpu_ids = [g for g, _ in members]
        if len(set(gpu_ids)) != len(gpu_ids):
            g = next(x for x in gpu_ids if gpu_ids.count(x) > 1)
            tbs = sorted(t for x, t in members if x == g)
            raise MscclError(f"{rd.source}: threadblocks {tbs} of gpu {g} are linked by "
                             "send/recv chains to each other; ACE needs them on one channel "
                             "index, which one gpu cannot give to two threadblocks")
        c = 0
        while any(c in used_by_gpu.get(g, set()) for g in gpu_ids):
            c += 1
        for g, t in members:
            assignment[(g, t)] = c
            used_by_gpu.setdefault(g, set()).add(c)
    return assignment
