"""Burst splitter: cuts a run of memory beats into AXI4 INCR bursts.

A request ``{beat_addr, span, meta}`` (addresses counted in beats; ``span`` = ``beats +
beat_addr % max_burst``, the beats from the ``max_burst``-aligned block holding the first beat
to the end, for a run of ``beats`` >= 1 beats) becomes a sequence of bursts ``{beat_addr, len,
last, meta}`` (``len`` is AXI's beats minus one). A requester computes ``span`` in the same
adder as the beat count (:func:`beat_span`), which spares the splitter a compare. A burst
ends at the request's end or where the beat address reaches a multiple of ``max_burst``, so every
burst is at most ``max_burst`` beats and, because ``max_burst`` beats divide 4 KiB (checked by
:class:`ace.config.AceConfig`), no burst crosses a 4 KiB boundary. Bursts after the first are
aligned to ``max_burst`` beats, which the write datapath relies on to place ``wlast`` without a
queue (:func:`burst_ends_after`).

Latency: a request is accepted in one cycle and its first burst is offered the next cycle.
Throughput: one burst per cycle, back to back across requests.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import AxiBurst
from ace.hw.common.skid_buffer import SkidBuffer

__all__ = ["BurstSplitter", "beat_span", "split_bursts", "drive_address_channel"]


def beat_span(m, mem_addr, length, beat_log2: int, max_burst: int, width: int):
    """``span`` of the request for ``length`` bytes at byte address ``mem_addr`` (Amaranth
    values), with beats of ``1 << beat_log2`` bytes: the beats from the start of the
    ``max_burst``-beat block holding ``mem_addr`` to the beat holding the last byte, that is
    the beat count plus the first beat's place in its block; ``width`` bits. The address's low
    bits and the rounding constant are summed first (a narrow adder), so the wide sum is one
    carry chain."""
    low = beat_log2 + (max_burst - 1).bit_length()
    lead = Signal(low + 1, name="span_lead")
    m.d.comb += lead.eq(mem_addr[:low] + ((1 << beat_log2) - 1))
    return ((length + lead) >> beat_log2)[:width]


def split_bursts(beat_addr: int, beats: int, max_burst: int) -> list[tuple[int, int]]:
    """Golden model: the bursts ``(beat_addr, beats)`` that :class:`BurstSplitter` emits."""
    bursts = []
    while beats:
        n = min(beats, max_burst - beat_addr % max_burst)
        bursts.append((beat_addr, n))
        beat_addr += n
        beats -= n
    return bursts


class BurstSplitter(wiring.Component):
    """Split beat runs into aligned INCR bursts (see the module docstring).

    Parameters
    ----------
    addr_bits : int
        Width of a beat address (byte address bits minus log2 of the beat size).
    count_bits : int
        Width of a request's beat count.
    max_burst : int
        Longest burst in beats, a power of two from 1 to 256.
    meta_shape : shape-like
        Side information copied from each request to each of its bursts.

    Members
    -------
    i : In(stream of {beat_addr, span, meta})
    o : Out(stream of {beat_addr, len, last, meta})
    """

    def __init__(self, addr_bits: int, count_bits: int, max_burst: int, meta_shape=0):
        assert max_burst & (max_burst - 1) == 0 and 1 <= max_burst <= 256
        self.addr_bits = addr_bits
        self.count_bits = count_bits
        self.max_burst = max_burst
        self.meta_shape = meta_shape
        meta = {"meta": meta_shape} if Shape.cast(meta_shape).width else {}
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "beat_addr": unsigned(addr_bits), "span": unsigned(count_bits), **meta}))),
            "o": Out(stream.Signature(data.StructLayout({
                "beat_addr": unsigned(addr_bits), "len": unsigned(8), "last": unsigned(1),
                **meta}))),
        })

    def elaborate(self, platform):
        m = Module()
        phase_bits = (self.max_burst - 1).bit_length()
        max_burst = self.max_burst

        # The current burst's length field and last flag are registers, computed when the
        # request is taken (first burst: up to the first block boundary) or when the previous
        # burst is taken (every later burst starts on a boundary, so it is max_burst beats
        # unless it is the last). ``span`` counts the beats from the current burst's block
        # start to the request's end, so each decision is a compare of a register with a
        # constant: no subtraction sits in front of a compare, nor anything in front of ``o``.
        active = Signal()
        cur = Signal(self.addr_bits)
        span = Signal(self.count_bits)
        length = Signal(8)                  # AXI len of the current burst (beats - 1)
        last = Signal()
        has_meta = Shape.cast(self.meta_shape).width != 0
        meta = Signal(self.meta_shape)
        wide = phase_bits + 2               # holds 0 .. 2 * max_burst

        def at_most(value, blocks):
            """``value <= blocks * max_burst`` (``blocks`` 1 or 2) from its bits, without a
            carry chain: the bits above the limit are zero, and at the limit the low bits."""
            top = phase_bits + blocks.bit_length() - 1     # bit of the limit
            return (value[top + 1:] == 0) & (~value[top] | (value[:top] == 0))

        m.d.comb += [
            self.o.valid.eq(active),
            self.o.p.beat_addr.eq(cur),
            self.o.p.len.eq(length),
            self.o.p.last.eq(last),
            self.i.ready.eq(~active | (self.o.ready & last)),
        ]
        with m.If(self.o.valid & self.o.ready):
            # The next burst starts at the next block; it is the last if the request ends
            # within that block (span <= 2 * max_burst).
            fits = at_most(span, 2)
            m.d.sync += [
                cur.eq(Cat(Const(0, phase_bits), cur[phase_bits:] + 1)),
                span.eq(span - max_burst),
                last.eq(fits),
                length.eq(Mux(fits, span[:wide] - (max_burst + 1), max_burst - 1)),
            ]
            with m.If(last):
                m.d.sync += active.eq(0)
        with m.If(self.i.valid & self.i.ready):
            first = Cat(self.i.p.beat_addr[:phase_bits], Const(0, wide - phase_bits))
            fits = at_most(self.i.p.span, 1)
            # Both lengths beside the compare: span - first - 1 is span + ~first, and
            # max_burst - first - 1 is ~first in the phase bits.
            m.d.sync += [
                active.eq(1),
                cur.eq(self.i.p.beat_addr),
                span.eq(self.i.p.span),
                last.eq(fits),
                length.eq(Mux(fits, (self.i.p.span[:wide] + (~first)[:wide])[:wide],
                              (~first)[:phase_bits])),
            ]
            if has_meta:
                m.d.sync += meta.eq(self.i.p.meta)
        if has_meta:
            m.d.comb += self.o.p.meta.eq(meta)
        return m


def drive_address_channel(m, split, axi, channel: str, size_log2: int, allow):
    """Drive AXI address channel ``channel`` (``"ar"`` or ``"aw"``) of ``axi`` from the bursts
    of ``split`` through a :class:`SkidBuffer`, so ``{ar,aw}valid`` and the address come from
    registers and ``{ar,aw}ready`` reaches only the skid buffer (one cycle of latency). A burst
    enters the skid buffer only while ``allow`` is high. Returns ``(issued, accepted)``: a burst
    entered the skid buffer / was accepted on the port this cycle."""
    layout = data.StructLayout({"beat_addr": len(split.o.p.beat_addr), "len": 8})
    skid = SkidBuffer(layout)
    m.submodules[f"{channel}_skid"] = skid
    issued = Signal(name=f"{channel}_issued")
    accepted = Signal(name=f"{channel}_accepted")
    port = {name: getattr(axi, f"{channel}{name}") for name in
            ("id", "addr", "len", "size", "burst", "lock", "cache", "prot", "valid", "ready")}
    m.d.comb += [
        skid.i.valid.eq(split.o.valid & allow),
        skid.i.p.beat_addr.eq(split.o.p.beat_addr),
        skid.i.p.len.eq(split.o.p.len),
        split.o.ready.eq(skid.i.ready & allow),
        issued.eq(skid.i.valid & skid.i.ready),
        port["id"].eq(0),
        port["addr"].eq(skid.o.p.beat_addr << size_log2),
        port["len"].eq(skid.o.p.len),
        port["size"].eq(size_log2),
        port["burst"].eq(AxiBurst.INCR),
        port["lock"].eq(0),
        port["cache"].eq(0b0011),
        port["prot"].eq(0),
        port["valid"].eq(skid.o.valid),
        skid.o.ready.eq(port["ready"]),
        accepted.eq(port["valid"] & port["ready"]),
    ]
    return issued, accepted
