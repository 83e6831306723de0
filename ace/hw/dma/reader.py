"""DMA read side: memory to SRAM (LOAD) and memory to ``rd_stream`` (MEM_TO_STREAM).

::

    cmd --+--> ar_q --> BurstSplitter --> AR (at most max_reads_in_flight bursts outstanding)
          |
          +--> r_q ---> R beats --> [WidthDownsizer] --> Realigner --> sram_w / rd_stream
                        (count, status)  (mem_bytes > link_bytes)     |
                                                                      +--> cpl (at the last word)

A command reads the memory beats (``M`` = ``mem_bytes``) covering ``[mem_addr, mem_addr +
length)``; all reads use ID 0, so data returns in order and the R side just counts beats per
command. When the port is wider than a link word (``W`` = ``link_bytes``, ``M = k W``, k = 2 or
4), the :class:`WidthDownsizer` splits each beat into the words that hold payload bytes (the
first beat from the word holding ``mem_addr``, the last up to the word holding the last byte),
one per cycle; with ``k = 1`` the beats go straight on. The realigner then drops the leading
``mem_addr % W`` bytes so SRAM word ``sram_addr + j`` (or stream word ``j``) holds payload bytes
``j*W .. j*W + W - 1``; the last word's byte mask / ``tkeep`` covers only payload bytes. An error
response marks the command failed but every beat is still consumed and every word still
delivered (with undefined contents), so nothing downstream waits forever.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature
from ace.hw.common.replica import replicates
from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.common.skid_fifo import SkidFifo
from ace.hw.dma.burst import BurstSplitter, beat_span, drive_address_channel
from ace.hw.dma.downsizer import WidthDownsizer
from ace.hw.dma.queue import CommandQueue, queues_open
from ace.hw.dma.realign import Realigner
from ace.layouts import (DMA_ID_BITS, DMA_LENGTH_BITS, AxiStreamSignature, DmaCompletion,
                      DmaStatus, sram_write_signature)

__all__ = ["DmaReader", "TransferCommand", "count_items"]


def count_items(m, name: str, count, single, step):
    """A counter over the items (beats, words) of the command at a queue's head, whose first
    and last flags come from registers: ``count`` (the command's items) and ``single`` (it has
    one item) are fields of the queue's head register, ``step`` is high when an item is taken.
    Returns ``(index, first, last)``. Whether the next item is the last is decided one item
    ahead, into a register, from a down counter of the items left (a compare with a constant),
    so no adder or compare of counts sits between the queue head and what the flags drive (the
    queue's read enable, the realigner's input)."""
    index = Signal(len(count), name=f"{name}_index")
    left = Signal(len(count), name=f"{name}_left")  # items left, the current one included
    started = Signal(name=f"{name}_started")    # an item of this command was taken
    last_next = Signal(name=f"{name}_last_next")  # ... and the next one is its last
    first = Signal(name=f"{name}_first")
    last = Signal(name=f"{name}_last")
    m.d.comb += [first.eq(~started), last.eq(Mux(started, last_next, single))]
    with m.If(step):
        with m.If(last):
            m.d.sync += [index.eq(0), started.eq(0)]
        with m.Else():
            m.d.sync += [index.eq(index + 1), started.eq(1)]
            with m.If(started):
                m.d.sync += [left.eq(left - 1), last_next.eq(left == 2)]
            with m.Else():
                m.d.sync += [left.eq(count - 1), last_next.eq(count == 2)]
    return index, first, last


class TransferCommand(data.StructLayout):
    """One transfer for a DMA half. ``stream`` selects the stream port instead of the SRAM as
    the far side (reader: memory to ``rd_stream``; writer: ``wr_stream`` to memory)."""

    def __init__(self, config):
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "stream": unsigned(1),
            "id": unsigned(DMA_ID_BITS),
            "length": unsigned(DMA_LENGTH_BITS),   # >= 1
            "mem_addr": unsigned(config.mem_addr_bits),
            "sram_addr": unsigned(max(1, (words - 1).bit_length())),
        })


class DmaReader(wiring.Component):
    """Read half of the DMA engine (see the module docstring).

    Every port is driven from registers: AR leaves a skid buffer (``arready`` reaches only
    it), and the output words leave a two-entry output slice holding their SRAM address and
    byte mask (the wide part a :class:`SkidFifo`: a 2:1 multiplexer of two registers), so
    ``tready``/``sram_w.ready`` reach only that slice's control and the completion register.

    Latency: about 5 cycles from a command to its AR (queue, burst splitter, AR skid buffer),
    and from an R beat to its word on ``sram_w``/``rd_stream`` :attr:`Realigner.latency` (3)
    plus 1 (output slice) cycles, plus :attr:`WidthDownsizer.latency` when the port is
    wider than a link word.
    Throughput: one word per cycle on ``sram_w``/``rd_stream`` (one R beat every
    ``mem_bytes // link_bytes`` cycles), plus one cycle for an unaligned command's flush word.

    Members
    -------
    cmd : In(stream of :class:`TransferCommand`)
    axi : Out(read half of :class:`Axi4Signature`), ``mem_bytes`` wide
    sram_w : Out(:func:`sram_write_signature`), ``link_bytes`` wide
    rd_stream : Out(:class:`AxiStreamSignature` with ``tkeep`` and ``tuser`` = id), ``link_bytes``
    cpl : Out(stream of :class:`DmaCompletion`), held until taken; one per command
    bytes : Out(range(mem_bytes + 1)), payload bytes in the R beat accepted in the previous
        cycle (registered: a byte counter summing it lags the port by one cycle)
    """

    def __init__(self, config, *, cmd_depth: int = 4):
        self.config = config
        self.cmd_depth = cmd_depth
        W, M = config.link_bytes, config.mem_bytes
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "cmd": In(stream.Signature(TransferCommand(config))),
            "axi": Out(Axi4Signature(config.mem_addr_bits, M, config.mem_id_bits,
                                     write=False)),
            "sram_w": Out(sram_write_signature(words, W)),
            "rd_stream": Out(AxiStreamSignature(W, keep=True, user_bits=DMA_ID_BITS)),
            "cpl": Out(stream.Signature(DmaCompletion())),
            "bytes": Out(range(M + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        self._copies = replicates(cfg, platform)     # control copies per lane (replica.py)
        W, M, k = cfg.link_bytes, cfg.mem_bytes, cfg.mem_beat_words
        lw = (W - 1).bit_length()          # log2 of the word size
        lm = (M - 1).bit_length()          # log2 of the memory beat size
        beat_bits = cfg.mem_addr_bits - lm
        count_bits = DMA_LENGTH_BITS - lw + 1
        sram_bits = len(self.sram_w.p.addr)

        # -- command split into the AR queue and the R queue --------------------------------
        cmd = self.cmd.p
        off = Signal(range(W))             # byte offset in the first word
        nbeats = Signal(count_bits)        # memory beats covering the payload
        beat_lead = Signal(lm + 1)
        end_lane = Signal(range(M))        # the last payload byte's place in its beat
        straddles = Signal()               # the payload covers one more memory word than words
        m.d.comb += [
            off.eq(cmd.mem_addr[:lw]),
            beat_lead.eq(cmd.mem_addr[:lm] + (M - 1)),      # narrow, so the next is one chain
            nbeats.eq((cmd.length + beat_lead) >> lm),
            end_lane.eq(cmd.mem_addr[:lm] + cmd.length[:lm] - 1),
            # Narrow sums only: the words' count ceil(length / W) and the memory grid's differ
            # exactly when off plus the last byte's place in its word reaches the next word.
            straddles.eq(off + (cmd.length[:lw] - 1)[:lw] >= W),
        ]

        m.submodules.ar_q = ar_q = CommandQueue(width=beat_bits + count_bits,
                                                depth=self.cmd_depth, replicate=self._copies,
                                                registered_write=True)
        r_layout = data.StructLayout({
            "to_stream": 1, "id": DMA_ID_BITS, "sram_addr": sram_bits,
            "beats": count_bits, "single": 1, "beat_lo": range(M), "beat_hi": range(M + 1),
            "shift": range(W + 1), "drop_first": 1, "flush": 1, "tail": range(W + 1),
            # words of the first and last beat holding payload (wide port only)
            **({"word_lo": range(k), "word_hi": range(k)} if k > 1 else {}),
        })
        m.submodules.r_q = r_q = CommandQueue(width=r_layout.size, depth=self.cmd_depth,
                                              replicate=self._copies, head="fifo",
                                              registered_write=True)
        r_in = data.View(r_layout, r_q.w_data)
        m.d.comb += [
            ar_q.w_data.eq(Cat(cmd.mem_addr[lm:], beat_span(
                m, cmd.mem_addr, cmd.length, lm, cfg.max_burst_beats, count_bits))),
            r_in.to_stream.eq(cmd.stream),
            r_in.id.eq(cmd.id),
            r_in.sram_addr.eq(cmd.sram_addr),
            r_in.beats.eq(nbeats),
            # One beat: the payload ends within the first beat.
            r_in.single.eq((cmd.length[lm + 1:] == 0)
                           & (cmd.length[:lm + 1] + cmd.mem_addr[:lm] <= M)),
            r_in.beat_lo.eq(cmd.mem_addr[:lm]),
            r_in.beat_hi.eq(end_lane + 1),
            r_in.shift.eq(Mux(off == 0, W, off)),
            r_in.drop_first.eq(off != 0),
            r_in.flush.eq((off != 0) & ~straddles),
            r_in.tail.eq(cmd.length[:lw] + Mux(cmd.length[:lw] == 0, W, 0)),
            self.cmd.ready.eq(queues_open(m, ar_q, r_q)),
            ar_q.w_en.eq(self.cmd.valid & self.cmd.ready),
            r_q.w_en.eq(self.cmd.valid & self.cmd.ready),
        ]
        if k > 1:
            m.d.comb += [r_in.word_lo.eq(cmd.mem_addr[lw:lm]), r_in.word_hi.eq(end_lane[lw:])]
        self._elaborate_ar(m, ar_q, beat_bits, count_bits)
        realign = self._elaborate_r(m, data.View(r_layout, r_q.r_data), r_q, sram_bits)
        self._elaborate_words(m, realign)
        return m

    def _elaborate_ar(self, m, ar_q, beat_bits, count_bits):
        """AR: bursts from the burst splitter, at most ``max_reads_in_flight`` outstanding."""
        cfg = self.config
        lm = (cfg.mem_bytes - 1).bit_length()
        m.submodules.split = split = BurstSplitter(beat_bits, count_bits, cfg.max_burst_beats)
        m.d.comb += [
            split.i.valid.eq(ar_q.r_rdy),
            split.i.p.beat_addr.eq(ar_q.r_data[:beat_bits]),
            split.i.p.span.eq(ar_q.r_data[beat_bits:]),
            ar_q.r_en.eq(split.i.ready),
        ]
        # A burst counts as in flight from the cycle it enters the AR skid buffer.
        # ``can_issue`` (inflight below the bound) is a register, from the next count.
        inflight = Signal(range(cfg.max_reads_in_flight + 1))
        inflight_next = Signal.like(inflight)
        can_issue = Signal(init=1)
        issued, _ = drive_address_channel(m, split, self.axi, "ar", lm, can_issue)
        r_done = self.axi.rvalid & self.axi.rready & self.axi.rlast
        m.d.comb += inflight_next.eq(inflight)
        with m.If(issued & ~r_done):
            m.d.comb += inflight_next.eq(inflight + 1)
        with m.Elif(~issued & r_done):
            m.d.comb += inflight_next.eq(inflight - 1)
        m.d.sync += [inflight.eq(inflight_next),
                     can_issue.eq(inflight_next < cfg.max_reads_in_flight)]

    def _elaborate_r(self, m, cur, r_q, sram_bits):
        """R beats of the command at the head of ``r_q`` (``cur``): status, byte count, and
        through the downsizer (wide port) into the realigner, which is returned."""
        cfg = self.config
        W, M, k = cfg.link_bytes, cfg.mem_bytes, cfg.mem_beat_words
        axi = self.axi
        meta_layout = data.StructLayout({
            "to_stream": 1, "id": DMA_ID_BITS, "sram_addr": sram_bits,
            "tail": range(W + 1), "status": DmaStatus,
        })
        m.submodules.realign = realign = Realigner(W, meta_layout,
                                                   lanes=None if self._copies else 1)

        status = Signal(DmaStatus)          # accumulated over the command's beats
        status_now = Signal(DmaStatus)
        with m.If((status == DmaStatus.OKAY) & (axi.rresp[1] == 1)):
            m.d.comb += status_now.as_value().eq(Cat(axi.rresp, Const(0, 1)))
        with m.Else():
            m.d.comb += status_now.eq(status)
        r_hs = axi.rvalid & axi.rready
        _, first, last = count_items(m, "beat", cur.beats, cur.single, r_hs)
        m.d.comb += r_q.r_en.eq(r_hs & last)
        with m.If(r_hs):
            m.d.sync += status.eq(Mux(last, DmaStatus.OKAY, status_now))

        # Payload bytes of this beat: lanes from beat_lo (first beat) up to beat_hi (last).
        lo = Signal(range(M + 1))
        hi = Signal(range(M + 1))
        m.d.comb += [
            lo.eq(Mux(first, cur.beat_lo, 0)),
            hi.eq(Mux(last, cur.beat_hi, M)),
        ]
        m.d.sync += self.bytes.eq(Mux(r_hs, hi - lo, 0))

        # The realigner's controls, constant over the command; with a wide port they travel
        # through the downsizer as its meta.
        controls = data.StructLayout({"shift": range(W + 1), "drop_first": 1, "flush": 1,
                                      "meta": meta_layout})
        ctl = Signal(controls)
        m.d.comb += [
            ctl.shift.eq(cur.shift), ctl.drop_first.eq(cur.drop_first), ctl.flush.eq(cur.flush),
            ctl.meta.to_stream.eq(cur.to_stream), ctl.meta.id.eq(cur.id),
            ctl.meta.sram_addr.eq(cur.sram_addr), ctl.meta.tail.eq(cur.tail),
            ctl.meta.status.eq(status_now),
        ]
        if k == 1:
            words = realign.i
            m.d.comb += [words.p.first.eq(first), words.p.last.eq(last)]
            m.d.comb += [words.p[name].eq(ctl[name]) for name in controls.members]
        else:
            m.submodules.downsize = words = WidthDownsizer(W, k, controls)
            m.d.comb += [
                words.i.p.first.eq(first),
                words.i.p.last.eq(last),
                words.i.p.lo.eq(Mux(first, cur.word_lo, 0)),
                words.i.p.hi.eq(Mux(last, cur.word_hi, k - 1)),
                words.i.p.meta.eq(ctl),
            ]
            m.d.comb += [realign.i.valid.eq(words.o.valid), words.o.ready.eq(realign.i.ready),
                         realign.i.p.data.eq(words.o.p.data),
                         realign.i.p.first.eq(words.o.p.first),
                         realign.i.p.last.eq(words.o.p.last)]
            m.d.comb += [realign.i.p[name].eq(words.o.p.meta[name]) for name in controls.members]
            words = words.i
        m.d.comb += [
            words.valid.eq(axi.rvalid & r_q.r_rdy),
            axi.rready.eq(words.ready & r_q.r_rdy),
            words.p.data.eq(axi.rdata),
        ]
        return realign

    def _elaborate_words(self, m, realign):
        """Output words of ``realign``, with their SRAM address and byte mask, through a
        two-entry output slice to the SRAM write port or rd_stream; the completion at the last
        word, taken from the slice's output (so it never precedes the word's delivery). The
        slice is two with the same cycles (both the two-entry FIFO of the skid buffer contract,
        fed the same valid and ready): a :class:`SkidFifo` for the wide part (data, mask,
        address, id, status), whose load enables are registers, so the output's ready (a port
        and the completion register) reaches only its pointers and flags; and a
        :class:`SkidBuffer` for the four flags the ports' valid and the ready logic read, from
        registers. The SkidFifo's ready copies, one per realigner control set, give the
        realigner's lanes their load enables."""
        W = self.config.link_bytes
        o = realign.o
        meta = o.p.meta
        # ``to_stream`` and ``last`` twice: one copy drives the ports' valid, one the ready.
        flags = SkidBuffer(data.StructLayout({"to_stream": 1, "last": 1, "ctl_to_stream": 1,
                                              "ctl_last": 1}))
        layout = data.StructLayout({"addr": len(self.sram_w.p.addr), "data": 8 * W,
                                    "mask": W, "id": DMA_ID_BITS, "status": DmaStatus})
        sets = realign.control_sets
        if self._copies:
            out = SkidFifo(layout, slice_bits=-(-layout.size // sets), ready_copies=sets)
            realign.o_ready_copies = out.ready_copies
        else:
            out = SkidFifo(layout)
        m.submodules.out_flags = flags
        m.submodules.out = out
        word = Signal(len(self.sram_w.p.addr))
        m.d.comb += [
            out.i.valid.eq(o.valid),
            flags.i.valid.eq(o.valid),
            o.ready.eq(flags.i.ready),
            flags.i.p.to_stream.eq(meta.to_stream),
            flags.i.p.last.eq(o.p.last),
            flags.i.p.ctl_to_stream.eq(meta.to_stream),
            flags.i.p.ctl_last.eq(o.p.last),
            out.i.p.addr.eq(meta.sram_addr + word),
            out.i.p.data.eq(o.p.data),
            out.i.p.mask.eq(Mux(o.p.last, ~(Const((1 << W) - 1, W) << meta.tail)[:W],
                                (1 << W) - 1)),
            out.i.p.id.eq(meta.id),
            out.i.p.status.eq(meta.status),
        ]
        with m.If(o.valid & o.ready):
            m.d.sync += word.eq(Mux(o.p.last, 0, word + 1))

        w, f = out.o, flags.o.p
        valid = flags.o.valid               # equal to w.valid
        ready = Signal()
        cpl_full = Signal()
        deliver = Signal()
        m.d.comb += deliver.eq(valid & (~f.last | ~cpl_full))
        ctl_ready = Mux(f.ctl_to_stream, self.rd_stream.tready, self.sram_w.ready)
        m.d.comb += [
            self.sram_w.valid.eq(deliver & ~f.to_stream),
            self.sram_w.p.addr.eq(w.p.addr),
            self.sram_w.p.data.eq(w.p.data),
            self.sram_w.p.mask.eq(w.p.mask),
            self.rd_stream.tvalid.eq(deliver & f.to_stream),
            self.rd_stream.tdata.eq(w.p.data),
            self.rd_stream.tkeep.eq(w.p.mask),
            self.rd_stream.tlast.eq(f.last),
            self.rd_stream.tuser.eq(w.p.id),
            ready.eq((~f.ctl_last | ~cpl_full) & ctl_ready),
            w.ready.eq(ready),
            flags.o.ready.eq(ready),
        ]
        m.d.comb += self.cpl.valid.eq(cpl_full)
        with m.If(self.cpl.valid & self.cpl.ready):
            m.d.sync += cpl_full.eq(0)
        with m.If(valid & ready & f.ctl_last):
            m.d.sync += [
                cpl_full.eq(1),
                self.cpl.p.id.eq(w.p.id),
                self.cpl.p.status.eq(w.p.status),
            ]
