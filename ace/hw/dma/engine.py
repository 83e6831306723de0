"""DMA engine: descriptor queue, AXI4 master, SRAM ports and baseline-mode streams.

::

                 +-----------+   read kinds    +-----------+  AR, R
    desc ------> | desc FIFO |-+-------------> | DmaReader |--------------+
                 +-----------+ | dispatcher    +-----------+ --> sram_w   |
                               | (paused while    |          --> rd_stream |--> m_axi
                               |  err_valid)      | cpl                    |
                               |               +-----------+  AW, W, B    |
                               +-------------> | DmaWriter |--------------+
                               | write kinds   +-----------+ <-- sram_r
                               |                  | cpl      <-- wr_stream
                               | length 0         v
                               +------------> completion arbiter --> cpl FIFO --> cpl
                                                  |
                                                  +--> error register (first failure)

Descriptors (:class:`ace.layouts.DmaDescriptor`) are taken in order from an 8-deep queue and
dispatched to the reader (LOAD, MEM_TO_STREAM) or the writer (STORE, STREAM_TO_MEM), which run
concurrently, each with a few descriptors in flight. A zero-length descriptor moves nothing and
completes when dispatched. Completions (:class:`ace.layouts.DmaCompletion`) are in order per side
(reads, writes); reads and writes interleave.

The first failed descriptor (an AXI SLVERR/DECERR in any of its beats or bursts) latches
``err_valid``, ``err_id`` and ``err_status``; while ``err_valid`` is set no new descriptor is
dispatched (those already dispatched finish, each with its own status). Pulsing ``err_clear``
clears the register and dispatch resumes.

Counters (free running, wrap at 2**48): ``bytes_read`` adds, for each accepted R beat, the
bytes of that beat inside the descriptor's ``[mem_addr, mem_addr + length)``; ``bytes_written``
adds the set ``wstrb`` bits of each accepted W beat; both lag the port by two cycles (the
halves register their per-beat counts, the counters add them). ``busy_cycles`` counts cycles
with a descriptor accepted and not yet completed (``busy``, a register).

Timing: the queue holds each descriptor with its kind and zero-length test decoded on entry
(a :class:`CommandQueue`: a LUT-RAM FIFO of ``queue_depth - 2`` entries with registered flags,
so ``desc.ready`` is a register, written a cycle late from a register, so the decoding ends at
flip-flops; then a two-entry :class:`SkidFifo` head whose load enables are registers); each
half takes its commands through a skid buffer, so the dispatch decision reads only registers
and drives only the head's pointers. Latency from a descriptor taken to its
first AR or AW: about 8 cycles (queue 2, command skid buffer, then the half's 5).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature
from ace.hw.common.replica import replicates
from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.dma.queue import CommandQueue
from ace.hw.dma.reader import DmaReader
from ace.hw.dma.writer import DmaWriter
from ace.layouts import (DMA_ID_BITS, AxiStreamSignature, DmaCompletion, DmaDescriptor, DmaKind,
                      DmaStatus, sram_read_signature, sram_write_signature)

__all__ = ["DmaEngine", "COUNTER_BITS"]

COUNTER_BITS = 48


class DmaEngine(wiring.Component):
    """The DMA engine (see the module docstring).

    Parameters
    ----------
    config : AceConfig
        Uses ``mem_bytes`` (memory beat), ``link_bytes`` (SRAM and stream word; ``mem_bytes``
        is 1, 2 or 4 times it), ``mem_addr_bits``, ``mem_id_bits``, ``max_burst_beats``,
        ``max_reads_in_flight`` and the SRAM buffer sizes.
    queue_depth : int
        Descriptors the input queue holds.

    Members
    -------
    desc : In(stream of :class:`DmaDescriptor`)
    cpl : Out(stream of :class:`DmaCompletion`)
    m_axi : Out(:class:`Axi4Signature`), the memory port, ``mem_bytes`` wide
    sram_w : Out(:func:`sram_write_signature`), LOAD data into the unified SRAM space; this
        port, ``sram_r``, ``rd_stream`` and ``wr_stream`` are ``link_bytes`` wide
    sram_r : Out(:func:`sram_read_signature`), STORE data from the unified SRAM space
    rd_stream : Out(:class:`AxiStreamSignature`), MEM_TO_STREAM words; ``tkeep`` marks payload
        bytes, ``tlast`` ends a descriptor, ``tuser`` is its id
    wr_stream : In(:class:`AxiStreamSignature`), STREAM_TO_MEM words, taken by count
    err_valid, err_id, err_status : Out, the error register
    err_clear : In(1), clears the error register
    busy : Out(1)
    bytes_read, bytes_written, busy_cycles : Out(48), counters
    """

    def __init__(self, config, *, queue_depth: int = 8):
        self.config = config
        self.queue_depth = queue_depth
        W, M = config.link_bytes, config.mem_bytes
        words = config.input_buffer_words + config.output_buffer_words
        super().__init__({
            "desc": In(stream.Signature(DmaDescriptor(config))),
            "cpl": Out(stream.Signature(DmaCompletion())),
            "m_axi": Out(Axi4Signature(config.mem_addr_bits, M, config.mem_id_bits)),
            "sram_w": Out(sram_write_signature(words, W)),
            "sram_r": Out(sram_read_signature(words, W)),
            "rd_stream": Out(AxiStreamSignature(W, keep=True, user_bits=DMA_ID_BITS)),
            "wr_stream": In(AxiStreamSignature(W)),
            "err_valid": Out(1),
            "err_id": Out(DMA_ID_BITS),
            "err_status": Out(DmaStatus),
            "err_clear": In(1),
            "busy": Out(1),
            "bytes_read": Out(COUNTER_BITS),
            "bytes_written": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config

        m.submodules.reader = reader = DmaReader(cfg, cmd_depth=max(4, cfg.max_reads_in_flight))
        m.submodules.writer = writer = DmaWriter(cfg)

        # -- ports of the halves ---------------------------------------------------------------
        for half in (reader, writer):
            for name, member in half.axi.signature.members.items():
                if member.flow == Out:
                    m.d.comb += getattr(self.m_axi, name).eq(getattr(half.axi, name))
                else:
                    m.d.comb += getattr(half.axi, name).eq(getattr(self.m_axi, name))
        wiring.connect(m, reader.sram_w, wiring.flipped(self.sram_w))
        wiring.connect(m, reader.rd_stream, wiring.flipped(self.rd_stream))
        wiring.connect(m, writer.sram_r, wiring.flipped(self.sram_r))
        wiring.connect(m, wiring.flipped(self.wr_stream), writer.wr_stream)

        # -- descriptor queue (decoded on entry, registered head) and dispatcher ----------------
        layout = self.desc.p.shape()
        entry = data.StructLayout({"desc": layout, "is_zero": 1, "is_read": 1, "is_write": 1})
        # The queue is a LUT-RAM FIFO with registered flags (``desc.ready`` a register) whose
        # head is a SkidFifo: the dispatch decision, from the head's registers, reaches only
        # the head's pointers and registered load enables, not its payload bits.
        m.submodules.queue = queue = CommandQueue(
            width=entry.size, depth=self.queue_depth - 2, slices=4,
            replicate=replicates(cfg, platform), head="fifo", registered_write=True)
        kind = self.desc.p.kind
        nothing = self.desc.p.length == 0
        reads = (kind == DmaKind.LOAD) | (kind == DmaKind.MEM_TO_STREAM)
        m.d.comb += [
            # The target decoded on entry, one-hot: length 0, the reader, the writer.
            queue.w_data.eq(Cat(self.desc.p, nothing, ~nothing & reads, ~nothing & ~reads)),
            queue.w_en.eq(self.desc.valid),
            self.desc.ready.eq(queue.w_rdy),
        ]
        queued = data.View(entry, queue.r_data)
        head = queued.desc
        is_zero, is_read, is_write = queued.is_zero, queued.is_read, queued.is_write
        go = Signal()
        zero_full = Signal()     # a zero-length descriptor's completion waits for the arbiter
        zero_id = Signal(DMA_ID_BITS)
        # The error register's copy for the dispatcher (``err_valid`` also drives a port).
        err_hold = Signal()
        m.d.comb += go.eq(queue.r_rdy & ~err_hold)
        # Each half takes its commands through a skid buffer: its ready is a register here.
        # (Control copies per slice of about 20 bits: its ready loads the whole command.)
        cmd_slices = 4 if replicates(cfg, platform) else 1
        m.submodules.reader_cmd = reader_cmd = SkidBuffer(reader.cmd.p.shape(), slices=cmd_slices)
        m.submodules.writer_cmd = writer_cmd = SkidBuffer(writer.cmd.p.shape(), slices=cmd_slices)
        wiring.connect(m, reader_cmd.o, reader.cmd)
        wiring.connect(m, writer_cmd.o, writer.cmd)
        for cmd in (reader_cmd.i.p, writer_cmd.i.p):
            m.d.comb += [
                cmd.id.eq(head.id),
                cmd.length.eq(head.length),
                cmd.mem_addr.eq(head.mem_addr),
                cmd.sram_addr.eq(head.sram_addr),
            ]
        m.d.comb += [
            reader_cmd.i.p.stream.eq(head.kind == DmaKind.MEM_TO_STREAM),
            writer_cmd.i.p.stream.eq(head.kind == DmaKind.STREAM_TO_MEM),
            reader_cmd.i.valid.eq(go & is_read),
            writer_cmd.i.valid.eq(go & is_write),
            queue.r_en.eq(~err_hold & ((is_zero & ~zero_full)
                                       | (is_read & reader_cmd.i.ready)
                                       | (is_write & writer_cmd.i.ready))),
        ]
        dispatched = queue.r_en & queue.r_rdy

        # -- completion arbiter (writer, then reader, then zero-length) -------------------------
        m.submodules.cpl_q = cpl_q = SyncFIFOBuffered(width=len(self.cpl.p.as_value()), depth=4)
        cpl_in = DmaCompletion()(cpl_q.w_data)
        with m.If(writer.cpl.valid):
            m.d.comb += [cpl_in.eq(writer.cpl.p), writer.cpl.ready.eq(cpl_q.w_rdy)]
        with m.Elif(reader.cpl.valid):
            m.d.comb += [cpl_in.eq(reader.cpl.p), reader.cpl.ready.eq(cpl_q.w_rdy)]
        with m.Else():
            m.d.comb += [cpl_in.id.eq(zero_id), cpl_in.status.eq(DmaStatus.OKAY)]
        completed = Signal()
        m.d.comb += [
            cpl_q.w_en.eq(writer.cpl.valid | reader.cpl.valid | zero_full),
            completed.eq(cpl_q.w_en & cpl_q.w_rdy),
            self.cpl.p.eq(cpl_q.r_data),
            self.cpl.valid.eq(cpl_q.r_rdy),
            cpl_q.r_en.eq(self.cpl.ready),
        ]
        with m.If(completed & ~writer.cpl.valid & ~reader.cpl.valid):
            m.d.sync += zero_full.eq(0)
        with m.If(dispatched & is_zero):
            m.d.sync += [zero_full.eq(1), zero_id.eq(head.id)]

        # -- error register -------------------------------------------------------------------
        failed = completed & (cpl_in.status != DmaStatus.OKAY)
        with m.If(self.err_clear):
            m.d.sync += [self.err_valid.eq(0), err_hold.eq(0)]
        with m.If(failed & (~err_hold | self.err_clear)):
            m.d.sync += err_hold.eq(1)
        with m.If(failed & (~self.err_valid | self.err_clear)):
            m.d.sync += [
                self.err_valid.eq(1),
                self.err_id.eq(cpl_in.id),
                self.err_status.eq(cpl_in.status),
            ]

        # -- busy and counters ------------------------------------------------------------------
        # Descriptors accepted and not yet completed: busy is a register (outstanding != 0,
        # decided from the count a cycle ahead), so no compare sits in front of busy_cycles's
        # adder.
        outstanding = Signal(range(self.queue_depth + 64))
        accepted = Signal()
        m.d.comb += accepted.eq(self.desc.valid & self.desc.ready)
        with m.If(accepted & ~completed):
            m.d.sync += [outstanding.eq(outstanding + 1), self.busy.eq(1)]
        with m.Elif(~accepted & completed):
            m.d.sync += [outstanding.eq(outstanding - 1), self.busy.eq(outstanding != 1)]
        m.d.sync += [
            self.bytes_read.eq(self.bytes_read + reader.bytes),
            self.bytes_written.eq(self.bytes_written + writer.bytes),
            self.busy_cycles.eq(self.busy_cycles + self.busy),
        ]
        return m
