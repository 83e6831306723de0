"""DMA write side: SRAM to memory (STORE) and ``wr_stream`` to memory (STREAM_TO_MEM).

::

    cmd --+--> aw_q --> BurstSplitter --> AW --> b_q (id, last burst) --> B --> cpl
          |
          +--> sreq_q --> SRAM read requests (STORE only)
          |
          +--> wd_q --> source words (sram_r.resp or wr_stream) --> Realigner
                            --> [WidthUpsizer] (mem_bytes > link_bytes) --> W

A command writes ``length`` payload bytes to ``[mem_addr, mem_addr + length)``. Source word ``k``
(SRAM word ``sram_addr + k``, or the ``k``-th ``wr_stream`` word, ``W`` = ``link_bytes`` wide)
holds payload bytes ``k*W .. k*W + W - 1``; the realigner moves them up by ``mem_addr % W`` onto
memory's word grid. When the port is wider (``M`` = ``mem_bytes`` = ``k W``, k = 2 or 4), the
:class:`WidthUpsizer` packs those words into memory beats, the first word into the lane of the
word holding ``mem_addr``; with ``k = 1`` the words are the beats. ``wstrb`` enables exactly
the payload bytes. All writes use ID 0. Bursts come from :class:`BurstSplitter`, whose bursts
end where the beat address reaches a multiple of ``max_burst_beats``; the W side places
``wlast`` by the same rule and sends a burst's data only after its AW was accepted. A command
completes when the B response of its last burst arrives; an error response in any of its
bursts marks it failed, and all its bursts still run.

``wr_stream`` words are taken by count (``ceil(length / W)`` per command); ``tlast`` is ignored.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature
from ace.hw.common.replica import replicas, replicates
from ace.hw.common.skid_fifo import SkidFifo
from ace.hw.dma.burst import BurstSplitter, beat_span, drive_address_channel
from ace.hw.dma.queue import CommandQueue, queues_open
from ace.hw.dma.reader import TransferCommand, count_items
from ace.hw.dma.realign import Realigner
from ace.hw.dma.upsizer import WidthUpsizer
from ace.layouts import (DMA_ID_BITS, DMA_LENGTH_BITS, AxiStreamSignature, DmaCompletion,
                      DmaStatus, sram_read_signature)

__all__ = ["DmaWriter"]


class DmaWriter(wiring.Component):
    """Write half of the DMA engine (see the module docstring).

    AW leaves a skid buffer and W a :class:`SkidFifo` (``awready``/``wready`` reach only
    them; ``wdata`` is a 2:1 multiplexer of two registers); a burst's W beats enter the W slice
    only after its AW was accepted on the port.

    Latency: about 5 cycles from a command to its AW (queue, burst splitter, AW skid buffer); a
    source word reaches W :attr:`Realigner.latency` (3) plus 1 (W slice) cycles later,
    plus :attr:`WidthUpsizer.latency` when the port is wider than a link word.
    Throughput: one source word per cycle (one W beat every ``mem_bytes // link_bytes``
    cycles), plus one cycle for an unaligned command's flush word.

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
    axi : Out(write half of :class:`Axi4Signature`), ``mem_bytes`` wide
    sram_r : Out(:func:`sram_read_signature`), ``link_bytes`` wide
    wr_stream : In(:class:`AxiStreamSignature`), ``link_bytes`` wide
    cpl : Out(stream of :class:`DmaCompletion`), held until taken; one per command
    bytes : Out(range(mem_bytes + 1)), bytes enabled by ``wstrb`` in the W beat accepted
        in the previous cycle (registered: a byte counter summing it lags the port by one cycle)
    """

    def __init__(self, config, *, cmd_depth: int = 4, max_writes: int = 8):
        self.config = config
        self.cmd_depth = cmd_depth
        self.max_writes = max_writes
        W, M = config.link_bytes, config.mem_bytes
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "cmd": In(stream.Signature(TransferCommand(config))),
            "axi": Out(Axi4Signature(config.mem_addr_bits, M, config.mem_id_bits,
                                     read=False)),
            "sram_r": Out(sram_read_signature(words, W)),
            "wr_stream": In(AxiStreamSignature(W)),
            "cpl": Out(stream.Signature(DmaCompletion())),
            "bytes": Out(range(M + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        self._copies = replicates(cfg, platform)     # control copies per lane (replica.py)
        W, M, k = cfg.link_bytes, cfg.mem_bytes, cfg.mem_beat_words
        lw = (W - 1).bit_length()
        lm = (M - 1).bit_length()
        beat_bits = cfg.mem_addr_bits - lm
        count_bits = DMA_LENGTH_BITS - lw + 1
        sram_bits = len(self.sram_r.req.p)
        phase_bits = (cfg.max_burst_beats - 1).bit_length()

        # -- command split into three queues ------------------------------------------------
        cmd = self.cmd.p
        off = Signal(range(W))             # byte offset in the first word
        nwords = Signal(count_bits)        # source words
        end_lane = Signal(range(M))        # the last payload byte's place in its beat
        straddles = Signal()               # the payload covers one more memory word than words
        m.d.comb += [
            off.eq(cmd.mem_addr[:lw]),
            nwords.eq((cmd.length + (W - 1)) >> lw),
            end_lane.eq(cmd.mem_addr[:lm] + cmd.length[:lm] - 1),
            # Narrow sums only: the words' count and the memory grid's differ exactly when off
            # plus the last byte's place in its word reaches the next word.
            straddles.eq(off + (cmd.length[:lw] - 1)[:lw] >= W),
        ]

        m.submodules.aw_q = aw_q = CommandQueue(
            width=beat_bits + count_bits + DMA_ID_BITS, depth=self.cmd_depth,
            replicate=self._copies, registered_write=True)
        sreq_layout = data.StructLayout({"sram_addr": sram_bits, "words": count_bits,
                                         "single": 1})
        m.submodules.sreq_q = sreq_q = CommandQueue(width=sreq_layout.size,
                                                    depth=self.cmd_depth,
                                                    replicate=self._copies,
                                                    registered_write=True)
        # ``start_ends``: the first beat ends a burst (its phase is the block's last), decoded
        # here so the W side's wlast needs no compare of the phase.
        beat_meta = data.StructLayout({
            "beat_lo": range(M), "beat_hi": range(M + 1), "start_phase": phase_bits,
            "start_ends": 1})
        lane = {"word_lo": range(k)} if k > 1 else {}   # lane of the first word (wide port)
        # ``from_stream`` once for the control and once more per realigner lane, as the select
        # of that lane's bytes of the source-word multiplexer (no select net spans the word).
        wd_layout = data.StructLayout({
            "from_stream": 1, "data_from_stream": self._realign_lanes(),
            "words": count_bits, "single": 1, "shift": range(W + 1),
            "flush": 1,
            "beat": beat_meta, **lane,
        })
        m.submodules.wd_q = wd_q = CommandQueue(width=wd_layout.size, depth=self.cmd_depth,
                                                replicate=self._copies, head="fifo",
                                                registered_write=True)

        sreq_in = data.View(sreq_layout, sreq_q.w_data)
        wd_in = data.View(wd_layout, wd_q.w_data)
        take = Signal()
        m.d.comb += [
            aw_q.w_data.eq(Cat(cmd.mem_addr[lm:], beat_span(
                m, cmd.mem_addr, cmd.length, lm, cfg.max_burst_beats, count_bits), cmd.id)),
            sreq_in.sram_addr.eq(cmd.sram_addr),
            sreq_in.words.eq(nwords),
            sreq_in.single.eq(cmd.length <= W),
            wd_in.from_stream.eq(cmd.stream),
            wd_in.data_from_stream.eq(cmd.stream.replicate(len(wd_in.data_from_stream))),
            wd_in.words.eq(nwords),
            wd_in.single.eq(cmd.length <= W),
            wd_in.shift.eq(W - off),
            wd_in.flush.eq(straddles),
            wd_in.beat.beat_lo.eq(cmd.mem_addr[:lm]),
            wd_in.beat.beat_hi.eq(end_lane + 1),
            wd_in.beat.start_phase.eq(cmd.mem_addr[lm:lm + phase_bits]),
            wd_in.beat.start_ends.eq(cmd.mem_addr[lm:lm + phase_bits] == cfg.max_burst_beats - 1),
            self.cmd.ready.eq(queues_open(m, aw_q, wd_q, sreq_q)),
            take.eq(self.cmd.valid & self.cmd.ready),
            aw_q.w_en.eq(take),
            wd_q.w_en.eq(take),
            sreq_q.w_en.eq(take & ~cmd.stream),
        ]
        if k > 1:
            m.d.comb += wd_in.word_lo.eq(cmd.mem_addr[lw:lm])
        b_q, aw_accepted = self._elaborate_aw(m, aw_q, beat_bits, count_bits)
        self._elaborate_sram_requests(m, data.View(sreq_layout, sreq_q.r_data), sreq_q)
        beats, realign = self._elaborate_words(m, data.View(wd_layout, wd_q.r_data), wd_q,
                                               beat_meta)
        self._elaborate_w(m, platform, beats, aw_accepted, realign if k == 1 else None)
        self._elaborate_b(m, b_q)
        return m

    def _realign_lanes(self):
        """The realigner's lanes: one per 2 bytes with control copies, else one."""
        return max(1, self.config.link_bytes // 2) if self._copies else 1

    def _elaborate_aw(self, m, aw_q, beat_bits, count_bits):
        """AW: bursts, bounded outstanding (``b_q`` holds one entry per burst, from the cycle it
        enters the AW skid buffer). Returns ``b_q`` and the AW handshake on the port."""
        cfg, axi = self.config, self.axi
        lm = (cfg.mem_bytes - 1).bit_length()
        m.submodules.split = split = BurstSplitter(beat_bits, count_bits, cfg.max_burst_beats,
                                                   DMA_ID_BITS)
        m.d.comb += [
            split.i.valid.eq(aw_q.r_rdy),
            split.i.p.beat_addr.eq(aw_q.r_data[:beat_bits]),
            split.i.p.span.eq(aw_q.r_data[beat_bits:beat_bits + count_bits]),
            split.i.p.meta.eq(aw_q.r_data[beat_bits + count_bits:]),
            aw_q.r_en.eq(split.i.ready),
        ]
        # At most max_writes entries: max_writes - 1 in the FIFO when written through its
        # registered room flag (the AW issue's allow), whose head holds two.
        m.submodules.b_q = b_q = CommandQueue(width=DMA_ID_BITS + 1, depth=self.max_writes - 1,
                                              slices=1)
        meta = Signal(DMA_ID_BITS + 1)
        m.d.comb += meta.eq(Cat(split.o.p.meta, split.o.p.last))
        issued, accepted = drive_address_channel(m, split, axi, "aw", lm, queues_open(m, b_q))
        m.d.comb += [b_q.w_data.eq(meta), b_q.w_en.eq(issued)]
        return b_q, accepted

    def _elaborate_sram_requests(self, m, sreq, sreq_q):
        """SRAM read requests of a STORE, one word address per cycle."""
        req_hs = self.sram_r.req.valid & self.sram_r.req.ready
        req_word, _, req_last = count_items(m, "req", sreq.words, sreq.single, req_hs)
        m.d.comb += [
            self.sram_r.req.valid.eq(sreq_q.r_rdy),
            self.sram_r.req.p.eq(sreq.sram_addr + req_word),
            sreq_q.r_en.eq(self.sram_r.req.ready & req_last),
        ]

    def _elaborate_words(self, m, cur, wd_q, beat_meta):
        """Source words of the command at the head of ``wd_q`` (``cur``) through the realigner
        and, with a wide port, the upsizer; returns the stream of memory beats
        ``{data, first, last, meta: {beat: beat_meta, word_lo (wide port)}}``."""
        W, k = self.config.link_bytes, self.config.mem_beat_words
        lane = {"word_lo": range(k)} if k > 1 else {}
        meta_layout = data.StructLayout({"beat": beat_meta, **lane})
        m.submodules.realign = realign = Realigner(W, meta_layout, lanes=self._realign_lanes())
        lane_bits = 8 * W // realign.lanes
        src_valid = Signal()
        src_hs = Signal()
        _, src_first, src_last = count_items(m, "src", cur.words, cur.single, src_hs)
        m.d.comb += [
            src_valid.eq(Mux(cur.from_stream, self.wr_stream.tvalid, self.sram_r.resp.valid)),
            realign.i.valid.eq(wd_q.r_rdy & src_valid),
            self.wr_stream.tready.eq(wd_q.r_rdy & cur.from_stream & realign.i.ready),
            self.sram_r.resp.ready.eq(wd_q.r_rdy & ~cur.from_stream & realign.i.ready),
            realign.i.p.data.eq(Cat(*(
                Mux(cur.data_from_stream[lane], self.wr_stream.tdata.word_select(lane, lane_bits),
                    self.sram_r.resp.p.word_select(lane, lane_bits))
                for lane in range(realign.lanes)))),
            realign.i.p.first.eq(src_first),
            realign.i.p.last.eq(src_last),
            realign.i.p.shift.eq(cur.shift),
            realign.i.p.drop_first.eq(0),
            realign.i.p.flush.eq(cur.flush),
            realign.i.p.meta.beat.eq(cur.beat),
        ]
        m.d.comb += [src_hs.eq(realign.i.valid & realign.i.ready),
                     wd_q.r_en.eq(src_hs & src_last)]
        if k == 1:
            return realign.o, realign
        m.d.comb += realign.i.p.meta.word_lo.eq(cur.word_lo)
        m.submodules.upsize = upsize = WidthUpsizer(W, k, meta_layout)
        word = realign.o
        m.d.comb += [
            upsize.i.valid.eq(word.valid),
            word.ready.eq(upsize.i.ready),
            upsize.i.p.data.eq(word.p.data),
            upsize.i.p.first.eq(word.p.first),
            upsize.i.p.last.eq(word.p.last),
            upsize.i.p.lo.eq(word.p.meta.word_lo),
            upsize.i.p.meta.eq(word.p.meta),
        ]
        return upsize.o, realign

    def _elaborate_w(self, m, platform, o, aw_accepted, realign=None):
        """W beats from ``o``: strobes and wlast at burst ends, computed as a beat enters the W
        slice (a :class:`SkidFifo`: its load enables are registers, so ``wready`` reaches only
        its pointers and flags), which it may do only once its burst's AW was accepted on the
        port (so W never leads AW). ``bytes`` counts the strobes of the beats the port
        accepts. When ``o`` is ``realign``'s output, each of its lanes takes its load enables
        from a register of its own holding the slice's ready and ``w_ok`` together."""
        cfg, axi = self.config, self.axi
        M = cfg.mem_bytes
        phase_bits = (cfg.max_burst_beats - 1).bit_length()
        beat = o.p.meta.beat
        aw_ahead = Signal(range(2 * self.max_writes + 2))
        w_ok = Signal()         # aw_ahead != 0, as a register (it gates the realigner's ready)
        w_ok_next = Signal()
        phase = Signal(phase_bits)
        phase_cur = Signal(phase_bits)
        # ``at_end``: the beat at ``phase`` ends a burst (phase == max_burst - 1), a register
        # set with ``phase``, so wlast is one gate of registers.
        at_end = Signal(init=cfg.max_burst_beats == 1)
        m.d.comb += phase_cur.eq(Mux(o.p.first, beat.start_phase, phase))
        all_ones = Const((1 << M) - 1, M)
        lo_mask = Signal(M)
        hi_mask = Signal(M)
        lo = Signal(range(M + 1))
        hi = Signal(range(M + 1))
        layout = data.StructLayout({"data": 8 * M, "strb": M, "last": 1, "bytes": range(M + 1)})
        # A copy of the slice's control per realigner control set (k = 1), else per 4 bytes.
        if self._copies:
            slices = realign.control_sets if realign is not None else max(1, M // 4)
            skid = SkidFifo(layout, slice_bits=-(-layout.size // slices))
        else:
            skid = SkidFifo(layout)
        m.submodules.w_skid = skid
        if realign is not None and self._copies:
            # Per realigner control set, one register equal to ``o.ready`` (the slice's ready
            # and w_ok, both as next values), so each lane's load enables start at a flip-flop
            # of its own with no gate between.
            realign.o_ready_copies = replicas(m, platform, skid.ready_next & w_ok_next,
                                              realign.control_sets, name="w_go")
        m.d.comb += [
            lo_mask.eq(Mux(o.p.first, (all_ones << beat.beat_lo)[:M], all_ones)),
            hi_mask.eq(Mux(o.p.last, ~(all_ones << beat.beat_hi)[:M], all_ones)),
            lo.eq(Mux(o.p.first, beat.beat_lo, 0)),
            hi.eq(Mux(o.p.last, beat.beat_hi, M)),
            skid.i.valid.eq(o.valid & w_ok),
            o.ready.eq(skid.i.ready & w_ok),
            skid.i.p.data.eq(o.p.data),
            skid.i.p.strb.eq(lo_mask & hi_mask),
            skid.i.p.last.eq(o.p.last | Mux(o.p.first, beat.start_ends, at_end)),
            skid.i.p.bytes.eq(hi - lo),
            axi.wdata.eq(skid.o.p.data),
            axi.wstrb.eq(skid.o.p.strb),
            axi.wlast.eq(skid.o.p.last),
            axi.wvalid.eq(skid.o.valid),
            skid.o.ready.eq(axi.wready),
        ]
        entered = skid.i.valid & skid.i.ready
        with m.If(entered):
            m.d.sync += [phase.eq(phase_cur + 1),
                         at_end.eq((phase_cur + 1)[:phase_bits] == cfg.max_burst_beats - 1)]
        w_done = entered & skid.i.p.last
        m.d.comb += w_ok_next.eq(w_ok)
        with m.If(aw_accepted & ~w_done):
            m.d.sync += aw_ahead.eq(aw_ahead + 1)
            m.d.comb += w_ok_next.eq(1)
        with m.Elif(~aw_accepted & w_done):
            m.d.sync += aw_ahead.eq(aw_ahead - 1)
            m.d.comb += w_ok_next.eq(aw_ahead != 1)
        m.d.sync += w_ok.eq(w_ok_next)
        m.d.sync += self.bytes.eq(Mux(axi.wvalid & axi.wready, skid.o.p.bytes, 0))

    def _elaborate_b(self, m, b_q):
        """B responses and the completion of a command's last burst."""
        axi = self.axi
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
