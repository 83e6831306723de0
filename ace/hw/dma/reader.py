"""DMA read side: memory to SRAM (LOAD) and memory to ``rd_stream`` (MEM_TO_STREAM).

::

    cmd --+--> ar_q --> BurstSplitter --> AR (at most max_reads_in_flight bursts outstanding)
          |
          +--> r_q ---> R beats --> Realigner --> sram_w (LOAD) / rd_stream (MEM_TO_STREAM)
                        (count, status)                 |
                                                        +--> cpl (at the last word)

A command reads the beats covering ``[mem_addr, mem_addr + length)``; all reads use ID 0, so
data returns in order and the R side just counts beats per command. The realigner drops the
leading ``mem_addr % B`` bytes so SRAM word ``sram_addr + j`` (or stream word ``j``) holds payload
bytes ``j*B .. j*B + B - 1``; the last word's byte mask / ``tkeep`` covers only payload bytes.
An error response marks the command failed but every beat is still consumed and every word still
delivered (with undefined contents), so nothing downstream waits forever.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature, AxiBurst
from ace.hw.dma.burst import BurstSplitter
from ace.hw.dma.realign import Realigner
from ace.layouts import (DMA_ID_BITS, DMA_LENGTH_BITS, AxiStreamSignature, DmaCompletion,
                      DmaStatus, sram_write_signature)

__all__ = ["DmaReader", "TransferCommand"]


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

    Members
    -------
    cmd : In(stream of :class:`TransferCommand`)
    axi : Out(read half of :class:`Axi4Signature`)
    sram_w : Out(:func:`sram_write_signature`)
    rd_stream : Out(:class:`AxiStreamSignature` with ``tkeep`` and ``tuser`` = id)
    cpl : Out(stream of :class:`DmaCompletion`), held until taken; one per command
    bytes : Out(range(B + 1)), payload bytes in the R beat accepted this cycle
    """

    def __init__(self, config, *, cmd_depth: int = 4):
        self.config = config
        self.cmd_depth = cmd_depth
        B = config.mem_bytes
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "cmd": In(stream.Signature(TransferCommand(config))),
            "axi": Out(Axi4Signature(config.mem_addr_bits, B, config.mem_id_bits,
                                     write=False)),
            "sram_w": Out(sram_write_signature(words, B)),
            "rd_stream": Out(AxiStreamSignature(B, keep=True, user_bits=DMA_ID_BITS)),
            "cpl": Out(stream.Signature(DmaCompletion())),
            "bytes": Out(range(B + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        B = cfg.mem_bytes
        lb = (B - 1).bit_length()          # log2 of the beat size
        beat_bits = cfg.mem_addr_bits - lb
        count_bits = DMA_LENGTH_BITS - lb + 1
        sram_bits = len(self.sram_w.p.addr)

        # -- command split into the AR queue and the R queue --------------------------------
        cmd = self.cmd.p
        off = Signal(range(B))
        nbeats = Signal(count_bits)        # memory beats covering the payload
        nwords = Signal(count_bits)        # output words
        m.d.comb += [
            off.eq(cmd.mem_addr[:lb]),
            nbeats.eq((cmd.mem_addr[:lb] + cmd.length + (B - 1)) >> lb),
            nwords.eq((cmd.length + (B - 1)) >> lb),
        ]

        m.submodules.ar_q = ar_q = SyncFIFO(
            width=beat_bits + count_bits, depth=self.cmd_depth)
        r_layout = data.StructLayout({
            "to_stream": 1, "id": DMA_ID_BITS, "sram_addr": sram_bits,
            "last_beat": count_bits, "off": range(B), "shift": range(B + 1),
            "drop_first": 1, "flush": 1, "tail": range(B + 1),
        })
        m.submodules.r_q = r_q = SyncFIFO(width=r_layout.size, depth=self.cmd_depth)
        r_in = data.View(r_layout, r_q.w_data)
        m.d.comb += [
            ar_q.w_data.eq(Cat(cmd.mem_addr[lb:], nbeats)),
            r_in.to_stream.eq(cmd.stream),
            r_in.id.eq(cmd.id),
            r_in.sram_addr.eq(cmd.sram_addr),
            r_in.last_beat.eq(nbeats - 1),
            r_in.off.eq(off),
            r_in.shift.eq(Mux(off == 0, B, off)),
            r_in.drop_first.eq(off != 0),
            r_in.flush.eq((off != 0) & (nwords == nbeats)),
            r_in.tail.eq(cmd.length[:lb] + Mux(cmd.length[:lb] == 0, B, 0)),
            self.cmd.ready.eq(ar_q.w_rdy & r_q.w_rdy),
            ar_q.w_en.eq(self.cmd.valid & self.cmd.ready),
            r_q.w_en.eq(self.cmd.valid & self.cmd.ready),
        ]

        # -- AR: bursts, bounded outstanding -------------------------------------------------
        m.submodules.split = split = BurstSplitter(beat_bits, count_bits, cfg.max_burst_beats)
        m.d.comb += [
            split.i.valid.eq(ar_q.r_rdy),
            split.i.p.beat_addr.eq(ar_q.r_data[:beat_bits]),
            split.i.p.beats.eq(ar_q.r_data[beat_bits:]),
            ar_q.r_en.eq(split.i.ready),
        ]
        inflight = Signal(range(cfg.max_reads_in_flight + 1))
        can_issue = Signal()
        m.d.comb += can_issue.eq(inflight < cfg.max_reads_in_flight)
        axi = self.axi
        m.d.comb += [
            axi.arid.eq(0),
            axi.araddr.eq(split.o.p.beat_addr << lb),
            axi.arlen.eq(split.o.p.len),
            axi.arsize.eq(lb),
            axi.arburst.eq(AxiBurst.INCR),
            axi.arlock.eq(0),
            axi.arcache.eq(0b0011),
            axi.arprot.eq(0),
            axi.arvalid.eq(split.o.valid & can_issue),
            split.o.ready.eq(axi.arready & can_issue),
        ]
        ar_hs = axi.arvalid & axi.arready
        r_hs = axi.rvalid & axi.rready
        r_done = r_hs & axi.rlast
        with m.If(ar_hs & ~r_done):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(~ar_hs & r_done):
            m.d.sync += inflight.eq(inflight - 1)

        # -- R beats into the realigner ---------------------------------------------------------
        cur = data.View(r_layout, r_q.r_data)
        meta_layout = data.StructLayout({
            "to_stream": 1, "id": DMA_ID_BITS, "sram_addr": sram_bits,
            "tail": range(B + 1), "status": DmaStatus,
        })
        m.submodules.realign = realign = Realigner(B, meta_layout)

        beat = Signal(count_bits)
        status = Signal(DmaStatus)          # accumulated over the command's beats
        status_now = Signal(DmaStatus)
        with m.If((status == DmaStatus.OKAY) & (axi.rresp[1] == 1)):
            m.d.comb += status_now.as_value().eq(Cat(axi.rresp, Const(0, 1)))
        with m.Else():
            m.d.comb += status_now.eq(status)
        first = Signal()
        last = Signal()
        m.d.comb += [
            first.eq(beat == 0),
            last.eq(beat == cur.last_beat),
            realign.i.valid.eq(axi.rvalid & r_q.r_rdy),
            axi.rready.eq(realign.i.ready & r_q.r_rdy),
            realign.i.p.data.eq(axi.rdata),
            realign.i.p.first.eq(first),
            realign.i.p.last.eq(last),
            realign.i.p.shift.eq(cur.shift),
            realign.i.p.drop_first.eq(cur.drop_first),
            realign.i.p.flush.eq(cur.flush),
            realign.i.p.meta.to_stream.eq(cur.to_stream),
            realign.i.p.meta.id.eq(cur.id),
            realign.i.p.meta.sram_addr.eq(cur.sram_addr),
            realign.i.p.meta.tail.eq(cur.tail),
            realign.i.p.meta.status.eq(status_now),
            r_q.r_en.eq(r_hs & last),
        ]
        with m.If(r_hs):
            m.d.sync += [beat.eq(Mux(last, 0, beat + 1)),
                         status.eq(Mux(last, DmaStatus.OKAY, status_now))]

        # Payload bytes of this beat: lanes from off (first beat) up to the tail (last beat).
        lo = Signal(range(B + 1))
        hi = Signal(range(B + 1))
        end_lane = Signal(range(B + 1))
        m.d.comb += [
            end_lane.eq(((cur.off + cur.tail - 1) & (B - 1)) + 1),
            lo.eq(Mux(first, cur.off, 0)),
            hi.eq(Mux(last, end_lane, B)),
            self.bytes.eq(Mux(r_hs, hi - lo, 0)),
        ]

        # -- output words: SRAM write port or rd_stream, completion at the last word ----------
        o = realign.o
        word = Signal(sram_bits)
        mask = Signal(B)
        m.d.comb += mask.eq(Mux(o.p.last, ~(Const((1 << B) - 1, B) << o.p.meta.tail)[:B],
                                (1 << B) - 1))
        cpl_full = Signal()
        deliver = Signal()
        m.d.comb += deliver.eq(o.valid & (~o.p.last | ~cpl_full))
        m.d.comb += [
            self.sram_w.valid.eq(deliver & ~o.p.meta.to_stream),
            self.sram_w.p.addr.eq(o.p.meta.sram_addr + word),
            self.sram_w.p.data.eq(o.p.data),
            self.sram_w.p.mask.eq(mask),
            self.rd_stream.tvalid.eq(deliver & o.p.meta.to_stream),
            self.rd_stream.tdata.eq(o.p.data),
            self.rd_stream.tkeep.eq(mask),
            self.rd_stream.tlast.eq(o.p.last),
            self.rd_stream.tuser.eq(o.p.meta.id),
            o.ready.eq((~o.p.last | ~cpl_full)
                       & Mux(o.p.meta.to_stream, self.rd_stream.tready, self.sram_w.ready)),
        ]
        with m.If(o.valid & o.ready):
            m.d.sync += word.eq(Mux(o.p.last, 0, word + 1))

        m.d.comb += self.cpl.valid.eq(cpl_full)
        with m.If(self.cpl.valid & self.cpl.ready):
            m.d.sync += cpl_full.eq(0)
        with m.If(o.valid & o.ready & o.p.last):
            m.d.sync += [
                cpl_full.eq(1),
                self.cpl.p.id.eq(o.p.meta.id),
                self.cpl.p.status.eq(o.p.meta.status),
            ]
        return m

