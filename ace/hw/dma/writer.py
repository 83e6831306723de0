"""DMA write side: SRAM to memory (STORE) and ``wr_stream`` to memory (STREAM_TO_MEM).

::

    cmd --+--> aw_q --> BurstSplitter --> AW --> b_q (id, last burst) --> B --> cpl
          |
          +--> sreq_q --> SRAM read requests (STORE only)
          |
          +--> wd_q --> source words (sram_r.resp or wr_stream) --> Realigner --> W

A command writes ``length`` payload bytes to ``[mem_addr, mem_addr + length)``. Source word ``k``
(SRAM word ``sram_addr + k``, or the ``k``-th ``wr_stream`` word) holds payload bytes
``k*B .. k*B + B - 1``; the realigner moves them up by ``mem_addr % B`` and ``wstrb`` enables
exactly the payload bytes. All writes use ID 0. Bursts come from :class:`BurstSplitter`, whose
bursts end where the beat address reaches a multiple of ``max_burst_beats``; the W side places
``wlast`` by the same rule and sends a burst's data only after its AW was accepted. A command
completes when the B response of its last burst arrives; an error response in any of its bursts
marks it failed, and all its bursts still run.

``wr_stream`` words are taken by count (``ceil(length / B)`` per command); ``tlast`` is ignored.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature, AxiBurst
from ace.hw.dma.burst import BurstSplitter
from ace.hw.dma.reader import TransferCommand
from ace.hw.dma.realign import Realigner
from ace.layouts import (DMA_ID_BITS, DMA_LENGTH_BITS, AxiStreamSignature, DmaCompletion,
                      DmaStatus, sram_read_signature)

__all__ = ["DmaWriter"]


class DmaWriter(wiring.Component):
    """Write half of the DMA engine (see the module docstring).

    Parameters
    ----------
    config : AceConfig
    cmd_depth : int
        Commands queued ahead of each stage.
    max_writes : int
        Write bursts outstanding (AW accepted, B not yet received).

    Members
    -------
    cmd : In(stream of :class:`TransferCommand`)
    axi : Out(write half of :class:`Axi4Signature`)
    sram_r : Out(:func:`sram_read_signature`)
    wr_stream : In(:class:`AxiStreamSignature`)
    cpl : Out(stream of :class:`DmaCompletion`), held until taken; one per command
    bytes : Out(range(B + 1)), bytes enabled by ``wstrb`` in the W beat accepted this cycle
    """

    def __init__(self, config, *, cmd_depth: int = 4, max_writes: int = 8):
        self.config = config
        self.cmd_depth = cmd_depth
        self.max_writes = max_writes
        B = config.mem_bytes
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "cmd": In(stream.Signature(TransferCommand(config))),
            "axi": Out(Axi4Signature(config.mem_addr_bits, B, config.mem_id_bits,
                                     read=False)),
            "sram_r": Out(sram_read_signature(words, B)),
            "wr_stream": In(AxiStreamSignature(B)),
            "cpl": Out(stream.Signature(DmaCompletion())),
            "bytes": Out(range(B + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        B = cfg.mem_bytes
        lb = (B - 1).bit_length()
        beat_bits = cfg.mem_addr_bits - lb
        count_bits = DMA_LENGTH_BITS - lb + 1
        sram_bits = len(self.sram_r.req.p)
        phase_bits = (cfg.max_burst_beats - 1).bit_length()
        axi = self.axi

        # -- command split into three queues ------------------------------------------------
        cmd = self.cmd.p
        off = Signal(range(B))
        nbeats = Signal(count_bits)        # memory beats (W beats)
        nwords = Signal(count_bits)        # source words
        m.d.comb += [
            off.eq(cmd.mem_addr[:lb]),
            nbeats.eq((cmd.mem_addr[:lb] + cmd.length + (B - 1)) >> lb),
            nwords.eq((cmd.length + (B - 1)) >> lb),
        ]

        m.submodules.aw_q = aw_q = SyncFIFO(
            width=beat_bits + count_bits + DMA_ID_BITS, depth=self.cmd_depth)
        sreq_layout = data.StructLayout({"sram_addr": sram_bits, "last_word": count_bits})
        m.submodules.sreq_q = sreq_q = SyncFIFO(width=sreq_layout.size,
                                                        depth=self.cmd_depth)
        wd_layout = data.StructLayout({
            "from_stream": 1, "last_word": count_bits, "shift": range(B + 1), "flush": 1,
            "off": range(B), "end_lane": range(B + 1), "start_phase": phase_bits,
        })
        m.submodules.wd_q = wd_q = SyncFIFO(width=wd_layout.size, depth=self.cmd_depth)

        sreq_in = data.View(sreq_layout, sreq_q.w_data)
        wd_in = data.View(wd_layout, wd_q.w_data)
        take = Signal()
        m.d.comb += [
            aw_q.w_data.eq(Cat(cmd.mem_addr[lb:], nbeats, cmd.id)),
            sreq_in.sram_addr.eq(cmd.sram_addr),
            sreq_in.last_word.eq(nwords - 1),
            wd_in.from_stream.eq(cmd.stream),
            wd_in.last_word.eq(nwords - 1),
            wd_in.shift.eq(B - off),
            wd_in.flush.eq(nbeats != nwords),
            wd_in.off.eq(off),
            wd_in.end_lane.eq(((cmd.mem_addr[:lb] + cmd.length - 1) & (B - 1)) + 1),
            wd_in.start_phase.eq(cmd.mem_addr[lb:lb + phase_bits]),
            self.cmd.ready.eq(aw_q.w_rdy & wd_q.w_rdy & (cmd.stream | sreq_q.w_rdy)),
            take.eq(self.cmd.valid & self.cmd.ready),
            aw_q.w_en.eq(take),
            wd_q.w_en.eq(take),
            sreq_q.w_en.eq(take & ~cmd.stream),
        ]

        # -- AW: bursts, bounded outstanding (b_q holds one entry per burst) -----------------
        m.submodules.split = split = BurstSplitter(beat_bits, count_bits, cfg.max_burst_beats,
                                                   DMA_ID_BITS)
        m.d.comb += [
            split.i.valid.eq(aw_q.r_rdy),
            split.i.p.beat_addr.eq(aw_q.r_data[:beat_bits]),
            split.i.p.beats.eq(aw_q.r_data[beat_bits:beat_bits + count_bits]),
            split.i.p.meta.eq(aw_q.r_data[beat_bits + count_bits:]),
            aw_q.r_en.eq(split.i.ready),
        ]
        m.submodules.b_q = b_q = SyncFIFO(width=DMA_ID_BITS + 1, depth=self.max_writes)
        m.d.comb += [
            axi.awid.eq(0),
            axi.awaddr.eq(split.o.p.beat_addr << lb),
            axi.awlen.eq(split.o.p.len),
            axi.awsize.eq(lb),
            axi.awburst.eq(AxiBurst.INCR),
            axi.awlock.eq(0),
            axi.awcache.eq(0b0011),
            axi.awprot.eq(0),
            axi.awvalid.eq(split.o.valid & b_q.w_rdy),
            split.o.ready.eq(axi.awready & b_q.w_rdy),
            b_q.w_data.eq(Cat(split.o.p.meta, split.o.p.last)),
            b_q.w_en.eq(axi.awvalid & axi.awready),
        ]

        # -- SRAM read requests (STORE) --------------------------------------------------------
        sreq = data.View(sreq_layout, sreq_q.r_data)
        req_word = Signal(count_bits)
        req_last = Signal()
        m.d.comb += [
            req_last.eq(req_word == sreq.last_word),
            self.sram_r.req.valid.eq(sreq_q.r_rdy),
            self.sram_r.req.p.eq(sreq.sram_addr + req_word),
            sreq_q.r_en.eq(self.sram_r.req.ready & req_last),
        ]
        with m.If(self.sram_r.req.valid & self.sram_r.req.ready):
            m.d.sync += req_word.eq(Mux(req_last, 0, req_word + 1))

        # -- source words into the realigner ---------------------------------------------------
        meta_layout = data.StructLayout({
            "off": range(B), "end_lane": range(B + 1), "start_phase": phase_bits})
        m.submodules.realign = realign = Realigner(B, meta_layout)
        cur = data.View(wd_layout, wd_q.r_data)
        src_word = Signal(count_bits)
        src_last = Signal()
        src_valid = Signal()
        m.d.comb += [
            src_last.eq(src_word == cur.last_word),
            src_valid.eq(Mux(cur.from_stream, self.wr_stream.tvalid, self.sram_r.resp.valid)),
            realign.i.valid.eq(wd_q.r_rdy & src_valid),
            self.wr_stream.tready.eq(wd_q.r_rdy & cur.from_stream & realign.i.ready),
            self.sram_r.resp.ready.eq(wd_q.r_rdy & ~cur.from_stream & realign.i.ready),
            realign.i.p.data.eq(Mux(cur.from_stream, self.wr_stream.tdata,
                                    self.sram_r.resp.p)),
            realign.i.p.first.eq(src_word == 0),
            realign.i.p.last.eq(src_last),
            realign.i.p.shift.eq(cur.shift),
            realign.i.p.drop_first.eq(0),
            realign.i.p.flush.eq(cur.flush),
            realign.i.p.meta.off.eq(cur.off),
            realign.i.p.meta.end_lane.eq(cur.end_lane),
            realign.i.p.meta.start_phase.eq(cur.start_phase),
        ]
        src_hs = realign.i.valid & realign.i.ready
        m.d.comb += wd_q.r_en.eq(src_hs & src_last)
        with m.If(src_hs):
            m.d.sync += src_word.eq(Mux(src_last, 0, src_word + 1))

        # -- W beats: strobes, wlast at burst ends, never ahead of their AW --------------------
        o = realign.o
        aw_ahead = Signal(range(2 * self.max_writes + 2))
        w_ok = Signal()
        m.d.comb += w_ok.eq(aw_ahead != 0)
        phase = Signal(phase_bits)
        phase_cur = Signal(phase_bits)
        m.d.comb += phase_cur.eq(Mux(o.p.first, o.p.meta.start_phase, phase))
        all_ones = Const((1 << B) - 1, B)
        lo_mask = Signal(B)
        hi_mask = Signal(B)
        m.d.comb += [
            lo_mask.eq(Mux(o.p.first, (all_ones << o.p.meta.off)[:B], all_ones)),
            hi_mask.eq(Mux(o.p.last, ~(all_ones << o.p.meta.end_lane)[:B], all_ones)),
            axi.wdata.eq(o.p.data),
            axi.wstrb.eq(lo_mask & hi_mask),
            axi.wlast.eq(o.p.last | (phase_cur == cfg.max_burst_beats - 1)),
            axi.wvalid.eq(o.valid & w_ok),
            o.ready.eq(axi.wready & w_ok),
        ]
        w_hs = axi.wvalid & axi.wready
        with m.If(w_hs):
            m.d.sync += phase.eq(phase_cur + 1)
        aw_hs = axi.awvalid & axi.awready
        w_done = w_hs & axi.wlast
        with m.If(aw_hs & ~w_done):
            m.d.sync += aw_ahead.eq(aw_ahead + 1)
        with m.Elif(~aw_hs & w_done):
            m.d.sync += aw_ahead.eq(aw_ahead - 1)

        lo = Signal(range(B + 1))
        hi = Signal(range(B + 1))
        m.d.comb += [
            lo.eq(Mux(o.p.first, o.p.meta.off, 0)),
            hi.eq(Mux(o.p.last, o.p.meta.end_lane, B)),
            self.bytes.eq(Mux(w_hs, hi - lo, 0)),
        ]

        # -- B responses and completion -------------------------------------------------------
        b_id = b_q.r_data[:DMA_ID_BITS]
        b_last = b_q.r_data[DMA_ID_BITS]
        status = Signal(DmaStatus)
        status_now = Signal(DmaStatus)
        with m.If((status == DmaStatus.OKAY) & (axi.bresp[1] == 1)):
            m.d.comb += status_now.as_value().eq(Cat(axi.bresp, Const(1, 1)))
        with m.Else():
            m.d.comb += status_now.eq(status)
        cpl_full = Signal()
        m.d.comb += [
            axi.bready.eq(b_q.r_rdy & (~b_last | ~cpl_full)),
            b_q.r_en.eq(axi.bvalid & axi.bready),
            self.cpl.valid.eq(cpl_full),
        ]
        with m.If(self.cpl.valid & self.cpl.ready):
            m.d.sync += cpl_full.eq(0)
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += status.eq(Mux(b_last, DmaStatus.OKAY, status_now))
            with m.If(b_last):
                m.d.sync += [
                    cpl_full.eq(1),
                    self.cpl.p.id.eq(b_id),
                    self.cpl.p.status.eq(status_now),
                ]
        return m
