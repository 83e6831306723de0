"""AXI4 interconnect: several read and write masters share one memory port, and none can block
another.

::

    rd0 AR --> slice --(fits rq0?)--+                                    +--> idq0 (arid)
    rd1 AR --> slice --(fits rq1?)--+--> round robin --> AR register --> m_axi AR
                          |    (arid = master index) ------------------- +
    m_axi R --(by rid)--> rq0 (read_buffer_beats) --> slice --> rd0 R   (rid: idq0's, kept
                      +-> rq1 (read_buffer_beats) --> slice --> rd1 R    with each beat)

    wr0 AW --> slice --> awq0 (4) ----+                                +--> bidq0 (awid)
    wr0 W ---> slice --> wq0 (write_buffer_beats + 2), whole bursts   +|
    wr1 AW --> slice --> awq1 (4) ----+--> round robin over masters with a whole burst buffered
    wr1 W ---> slice --> wq1 ...      |    --> AW register (awid = master index) --> m_axi AW
                            +--> W mux: the granted master's burst, back to back --> m_axi W
    m_axi B --(by bid)--> bq0 (max_writes_in_flight) --> wr0 B   (bid from bidq0)
                      +-> bq1 ...                    --> wr1 B   (bid from bidq1)

**Why no master can block another.** The memory port never waits on a master:

* Reads. Master ``i`` owns an R buffer of ``read_buffer_beats`` beats. Its AR goes to memory
  only when the beats already reserved for it (requested and not yet taken by the master) plus
  a burst of ``max_burst_beats`` fit that buffer (tested a cycle ahead, from registers); the
  reservation shrinks as the master takes beats. So every R beat memory returns has a place,
  ``m_axi.rready`` is always 1, and a master that never takes its R beats only stops its own
  ARs.
* Writes. A master's burst is forwarded only when its whole burst (up to the first ``wlast``)
  is in its W buffer, and then its beats go out back to back. A master that stalls in the
  middle of a burst holds nothing shared. B responses land in a per-master B buffer of
  ``max_writes_in_flight`` entries, and a master has at most that many bursts forwarded whose B
  it has not taken, so ``m_axi.bready`` is always 1 as well.

**IDs.** On ``m_axi`` the ID is the master's index (``arid = i`` for ``rd{i}``, ``awid = j`` for
``wr{j}``). Each master's own ``arid``/``awid`` is kept per outstanding burst in a small queue
(``idq``/``bidq``) and returned as its ``rid``/``bid`` (an R beat takes its ID from ``idq`` as
it arrives from memory and keeps it in the R buffer). Because one master's bursts all carry one
ID on ``m_axi``, memory returns them in order, so a master sees its R bursts and B responses in
the order it issued them, whatever IDs it used. Bursts are forwarded unchanged otherwise
(address, length, size, burst type, lock, cache, prot, strobes, responses).

Every master-side ready and R beat is registered: a master's AR, AW and W enter and its R
beats leave through register slices (:class:`~ace.hw.common.skid_buffer.SkidBuffer`, a cycle
of latency each, full rate; the wide ones with their control copied per 32-bit lane), so the
long wires between the masters and their queues start at flip-flops; every ``m_axi`` valid is
registered.

**Rules for masters.** ``arlen + 1`` and ``awlen + 1`` at most ``max_burst_beats`` (a longer read
never fits and waits forever; a longer write never completes in the W buffer); W beats in AW
order and ``wlast`` on beat ``awlen + 1``, as AXI4 requires (the interconnect counts whole bursts
by ``wlast`` and forwards each by ``awlen``). W may come before or after its AW.
"""

from __future__ import annotations

from amaranth.hdl import DomainRenamer, EnableInserter, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.buffered_flag_fifo import BufferedFlagFifo
from ace.hw.common.flag_fifo import FlagFifo
from ace.hw.common.arbiter import RoundRobinArbiter, one_hot_select
from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.common.skid_fifo import SkidFifo
from ace.hw.axi.signatures import Axi4Signature

__all__ = ["AxiInterconnect"]


def _check_int(name, value, low, high, extra=""):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}: {value!r} is not valid; "
                         f"allowed: an integer from {low} to {high}{extra}")


def _check_parameters(addr_bits, data_bytes, id_bits, read_masters, write_masters,
                      max_burst_beats, read_buffer_beats, write_buffer_beats,
                      max_writes_in_flight):
    """Raise ValueError naming the first bad parameter; return the two buffer sizes."""
    _check_int("addr_bits", addr_bits, 12, 64)
    _check_int("data_bytes", data_bytes, 1, 128, ", a power of two")
    if data_bytes & (data_bytes - 1):
        raise ValueError(f"data_bytes: {data_bytes} is not a power of two; allowed: "
                         "a power of two from 1 to 128")
    _check_int("read_masters", read_masters, 0, 64)
    _check_int("write_masters", write_masters, 0, 64)
    if read_masters + write_masters == 0:
        raise ValueError("read_masters, write_masters: both are 0; allowed: at least one "
                         "master in total")
    id_min = max(1, (max(read_masters, write_masters) - 1).bit_length())
    _check_int("id_bits", id_bits, id_min, 32,
               f" (it must hold the largest master index, "
               f"{max(read_masters, write_masters) - 1})")
    _check_int("max_burst_beats", max_burst_beats, 1, 256)
    if read_buffer_beats is None:
        read_buffer_beats = 2 * max_burst_beats
    if write_buffer_beats is None:
        write_buffer_beats = max_burst_beats
    _check_int("read_buffer_beats", read_buffer_beats, max_burst_beats, 1 << 16,
               " (at least max_burst_beats)")
    _check_int("write_buffer_beats", write_buffer_beats, max_burst_beats, 1 << 16,
               " (at least max_burst_beats)")
    _check_int("max_writes_in_flight", max_writes_in_flight, 1, 256)
    return read_buffer_beats, write_buffer_beats


class AxiInterconnect(wiring.Component):
    """Shares one AXI4 memory port among read and write masters (see the module docstring).

    Latency, uncontended, in cycles:

    * AR: :attr:`ar_latency` = 2, master AR handshake to ``m_axi.arvalid`` (the slice, then
      the AR register).
    * R: :attr:`r_latency` = 3, ``m_axi`` R beat to the master's ``rvalid`` (the R buffer and
      the master's R slice).
    * AW and W: :attr:`aw_latency` = 3, from the later of the master's AW handshake and its
      ``wlast`` beat handshake to ``m_axi.awvalid`` and the burst's first ``m_axi.wvalid``
      (both go out in the same cycle; the master's AW and W slices, then its queues).
    * B: :attr:`b_latency` = 1, ``m_axi`` B to the master's ``bvalid``.

    Throughput: one R beat and one W beat per cycle, one AR and one AW per cycle.

    * Reads: one master alone streams at one beat per cycle while the read round trip (memory
      latency + 6 cycles) is below ``read_buffer_beats - max_burst_beats`` cycles. When the
      port is ``k`` times wider than a link (``mem_bytes = k x link_bytes``), a DMA reader takes
      one beat every ``k`` cycles, its buffer holds its reservation ``k`` times longer, and
      ``k`` such masters stream at once at their full rate with the default buffer
      (``tests/test_axi_interconnect.py``: port 0.97 beats/cycle for k = 2 and 4).
    * Writes: the next burst is granted in the cycle the current burst's last W beat is
      accepted, so bursts follow back to back with no idle cycle when the next one is already
      whole in its W buffer. One master streaming full bursts at one beat per cycle keeps that
      up with the default ``write_buffer_beats`` (the W buffer's two extra entries, below, let
      the next burst complete while the current one drains).

    Buffers: the R and W buffers are
    :class:`~ace.hw.common.buffered_flag_fifo.BufferedFlagFifo` (``SyncFIFOBuffered``'s cycles,
    block RAM friendly, ``w_rdy`` a register). The R buffer has ``read_buffer_beats + 1``
    entries, of which reads reserve at most ``read_buffer_beats`` (the extra entry makes room
    certain whatever the buffer's internal state). The W buffer has ``write_buffer_beats + 2``
    entries. The AW queue holds 4 bursts; it, the B buffer and the master-ID queues are
    :class:`~ace.hw.common.flag_fifo.FlagFifo` (``SyncFIFO``'s cycles, flags in flip-flops;
    the ID queues written a cycle late from a register).

    Parameters
    ----------
    addr_bits, data_bytes, id_bits : int
        The :class:`Axi4Signature` of every port. ``id_bits`` must hold the largest master
        index, ``max(read_masters, write_masters) - 1``.
    read_masters, write_masters : int
        Number of read-only and write-only masters (either may be 0, not both).
    max_burst_beats : int
        Longest burst (``len + 1``) any master issues, 1 to 256.
    read_buffer_beats : int
        R buffer per read master, at least ``max_burst_beats``; default ``2 * max_burst_beats``.
    write_buffer_beats : int
        W buffer per write master, at least ``max_burst_beats``; default ``max_burst_beats``.
    max_writes_in_flight : int
        Bursts per write master forwarded to memory whose B response the master has not taken
        yet; also the depth of its B buffer. A master may queue 4 more AWs on top.
    replicate : bool
        Copy the wide register slices' control per 32-bit lane (default); false: one copy,
        the same cycles (:func:`~ace.hw.common.replica.replicates`).
    split_domains : bool
        The read half (AR, R) in clock domain ``read`` and the write half (AW, W, B) in
        ``write`` instead of ``sync``, for a caller that clocks each only while it can move
        (the engine's gated-clock form); the halves share no register. Default False.

    Members
    -------
    rd{i} : In(:class:`Axi4Signature` read half), for ``i < read_masters``
        Slave port facing read master ``i``.
    wr{j} : In(:class:`Axi4Signature` write half), for ``j < write_masters``
        Slave port facing write master ``j``.
    m_axi : Out(:class:`Axi4Signature`)
        The memory port; ``rready`` and ``bready`` are always 1. The ID is the master index.
    """

    ar_latency = 2
    r_latency = 3
    aw_latency = 3
    b_latency = 1
    aw_queue_depth = 4

    def __init__(self, addr_bits: int, data_bytes: int, id_bits: int, read_masters: int,
                 write_masters: int, *, max_burst_beats: int, read_buffer_beats: int | None = None,
                 write_buffer_beats: int | None = None, max_writes_in_flight: int = 4,
                 replicate: bool = True, split_domains: bool = False):
        try:
            read_buffer_beats, write_buffer_beats = _check_parameters(
                addr_bits, data_bytes, id_bits, read_masters, write_masters, max_burst_beats,
                read_buffer_beats, write_buffer_beats, max_writes_in_flight)
        except ValueError:
            self._MustUse__silence = True  # no "created but never used" warning on top
            raise

        self.addr_bits = addr_bits
        self.data_bytes = data_bytes
        self.id_bits = id_bits
        self.read_masters = read_masters
        self.write_masters = write_masters
        self.max_burst_beats = max_burst_beats
        self.read_buffer_beats = read_buffer_beats
        self.write_buffer_beats = write_buffer_beats
        self.max_writes_in_flight = max_writes_in_flight
        self.split_domains = split_domains
        # register slices: control per 32-bit lane, or one copy (``replicate`` false)
        self._slices = max(1, data_bytes // 4) if replicate else 1
        members = {}
        for i in range(read_masters):
            members[f"rd{i}"] = In(Axi4Signature(addr_bits, data_bytes, id_bits, write=False))
        for j in range(write_masters):
            members[f"wr{j}"] = In(Axi4Signature(addr_bits, data_bytes, id_bits, read=False))
        members["m_axi"] = Out(Axi4Signature(addr_bits, data_bytes, id_bits))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        reads, writes = (Module(), Module()) if self.split_domains else (m, m)
        if self.read_masters:
            self._elaborate_reads(reads)
        else:
            m.d.comb += self.m_axi.rready.eq(1)
        if self.write_masters:
            self._elaborate_writes(writes)
        else:
            m.d.comb += self.m_axi.bready.eq(1)
        if self.split_domains:
            m.submodules.reads = DomainRenamer("read")(reads)
            m.submodules.writes = DomainRenamer("write")(writes)
        return m

    # -- reads -----------------------------------------------------------------------------

    def _elaborate_reads(self, m):
        mem = self.m_axi
        n = self.read_masters
        ports = [getattr(self, f"rd{i}") for i in range(n)]
        r_layout = data.StructLayout({"data": 8 * self.data_bytes, "resp": 2, "last": 1,
                                      "id": self.id_bits})

        requests = []
        ar_free = Signal()                          # the AR register can take a burst now
        m.d.comb += ar_free.eq(~mem.arvalid | mem.arready)
        # The arbiter decides from registered requests alone; whether the AR register can take
        # the burst (``ar_free``, from the memory's ``arready``) only lets the decision be
        # taken: it gates the grant's every use (``ar_take``) and the arbiter's rotation, not
        # its requests. The same grants as with ``ar_free`` among the requests (when it is low
        # nothing is taken and the pointer holds), and the memory's ready reaches a few gates
        # instead of the whole arbitration.
        arb = RoundRobinArbiter(n)
        m.submodules.ar_arbiter = EnableInserter(ar_free)(arb)
        ar_take = Signal(n, name="ar_take")
        m.d.comb += ar_take.eq(arb.grant & ar_free.replicate(n))
        with m.If(mem.arready):
            m.d.sync += mem.arvalid.eq(0)

        # Each master's AR enters through a register slice, so its arready is a register and
        # the arbiter, the buffer-space compare and the AR register see registered requests.
        ar_fields = ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot")
        # ``short``: the burst is at most ``max_burst_beats`` long, compared on the way into the
        # slice, so the compare is not between the slice's register and the arbiter.
        ar_layout = data.StructLayout({**{name: len(getattr(ports[0], name))
                                          for name in ar_fields}, "short": 1})
        for i, port in enumerate(ports):
            # A skid FIFO: the grant (``ar_take``, this slice's ``o.ready``) reaches its few
            # pointer and flag registers, not the load enables of every payload bit (the
            # arbitration runs from one master's slice to another's, across the die).
            m.submodules[f"ar_slice{i}"] = ar_slice = SkidFifo(
                ar_layout, slice_bits=32 if self._slices > 1 else None)
            m.d.comb += [ar_slice.i.valid.eq(port.arvalid), port.arready.eq(ar_slice.i.ready)]
            m.d.comb += [ar_slice.i.payload[name].eq(getattr(port, name)) for name in ar_fields]
            m.d.comb += ar_slice.i.payload.short.eq(port.arlen < self.max_burst_beats)
            requests.append(ar_slice.o)

        for i, (port, req) in enumerate(zip(ports, requests)):
            rq = BufferedFlagFifo(width=r_layout.size, depth=self.read_buffer_beats + 1)
            # The master's ARID per burst in flight, taken as its R beats arrive from memory
            # (each beat is stored with it), so no R buffer output reaches this queue.
            idq = FlagFifo(width=self.id_bits, depth=self.read_buffer_beats)
            m.submodules[f"rq{i}"] = rq
            m.submodules[f"idq{i}"] = idq
            reserved = Signal(range(self.read_buffer_beats + 1), name=f"rd{i}_reserved")
            # Room for a burst of any allowed length, registered: computed a cycle ahead from
            # the reservation as it will be (taken beats not counted, so it may say no a cycle
            # longer than it must), so the arbiter starts from flip-flops. A burst longer than
            # ``max_burst_beats`` never fits.
            room = Signal(init=1, name=f"rd{i}_room")
            fits = Signal(name=f"rd{i}_fits")
            room_limit = self.read_buffer_beats - self.max_burst_beats
            m.d.sync += room.eq(Mux(ar_take[i],
                                    reserved + req.payload.arlen + 1 <= room_limit,
                                    reserved <= room_limit))
            m.d.comb += [
                fits.eq(room & req.payload.short),
                arb.requests[i].eq(req.valid & fits),
                req.ready.eq(ar_take[i]),
            ]
            # The ID queue is written a cycle after the grant, from registers (``rd{i}_push``,
            # ``rd{i}_arid``), so the arbitration ends at two flip-flops, not at the queue's
            # pointers and flags beside the R buffer: the burst enters the AR register in the
            # cycle after the grant and AXI returns its first R beat at least a cycle after the
            # AR handshake, and an entry written in one cycle is the head in the next.
            push = Signal(name=f"rd{i}_push")
            arid = Signal(self.id_bits, name=f"rd{i}_arid")
            m.d.sync += [push.eq(ar_take[i]), arid.eq(req.payload.arid)]
            m.d.comb += [idq.w_data.eq(arid), idq.w_en.eq(push)]
            # The master takes its beats from a register slice after the R buffer (whose block
            # RAM output sits apart from the master); a beat in the slice stays reserved.
            r_slice = SkidBuffer(r_layout, slices=self._slices)
            m.submodules[f"r_slice{i}"] = r_slice
            taken = port.rvalid & port.rready
            with m.If(ar_take[i]):
                m.d.sync += reserved.eq(reserved + req.payload.arlen + 1 - taken)
            with m.Elif(taken):
                m.d.sync += reserved.eq(reserved - 1)

            # R beats from memory: space is reserved, so they are always taken.
            beat_in = data.View(r_layout, rq.w_data)
            beat_out = r_slice.o.payload
            beat_here = mem.rvalid & (mem.rid == i)
            m.d.comb += [
                beat_in.data.eq(mem.rdata),
                beat_in.resp.eq(mem.rresp),
                beat_in.last.eq(mem.rlast),
                beat_in.id.eq(idq.r_data),
                rq.w_en.eq(beat_here),
                idq.r_en.eq(beat_here & mem.rlast),
                r_slice.i.valid.eq(rq.r_rdy),
                r_slice.i.payload.eq(rq.r_data),
                rq.r_en.eq(r_slice.i.ready),
                port.rvalid.eq(r_slice.o.valid),
                port.rdata.eq(beat_out.data),
                port.rresp.eq(beat_out.resp),
                port.rlast.eq(beat_out.last),
                port.rid.eq(beat_out.id),
                r_slice.o.ready.eq(port.rready),
            ]

        granted = data.View(ar_layout, one_hot_select(arb.grant, [r.payload for r in requests]))
        with m.If(arb.valid & ar_free):
            m.d.sync += [mem.arvalid.eq(1), mem.arid.eq(arb.grant_index)]
            m.d.sync += [getattr(mem, name).eq(granted[name])
                         for name in ar_fields if name != "arid"]
        m.d.comb += mem.rready.eq(1)

    # -- writes ----------------------------------------------------------------------------

    def _elaborate_writes(self, m):
        mem = self.m_axi
        n = self.write_masters
        ports = [getattr(self, f"wr{j}") for j in range(n)]
        aw_layout = data.StructLayout({
            "id": self.id_bits, "addr": self.addr_bits, "len": 8, "size": 3, "burst": 2,
            "lock": 1, "cache": 4, "prot": 3,
        })
        w_layout = data.StructLayout({"data": 8 * self.data_bytes, "strb": self.data_bytes})
        w_port_layout = data.StructLayout({"data": 8 * self.data_bytes, "strb": self.data_bytes,
                                           "last": 1})

        w_busy = Signal()                           # a burst's W beats are going out
        w_sel = Signal(range(n))                    # from this master
        w_left = Signal(8)                          # its beats after the current one
        w_end = Signal()                            # its last beat is accepted this cycle
        grant_free = Signal()
        # The burst ends by count (``awlen + 1`` beats, and ``m_axi.wlast`` is the count's),
        # so the next grant depends on registers and ``wready``, not on the W buffer's data.
        with m.If(mem.wvalid & mem.wready):
            m.d.sync += [w_left.eq(w_left - 1), mem.wlast.eq(w_left == 1)]
        m.d.comb += [
            w_end.eq(mem.wvalid & mem.wready & mem.wlast),
            grant_free.eq((~w_busy | w_end) & (~mem.awvalid | mem.awready)),
        ]
        with m.If(mem.awready):
            m.d.sync += mem.awvalid.eq(0)
        # ``w_from[j]``: ``w_busy & (w_sel == j)`` in a register of master ``j``'s own, which
        # alone reads its W buffer: the read enable of each buffer (its block RAM and output
        # register, by the master) starts from a flip-flop beside it, not from the W mux's
        # state in the middle of the die through a decode.
        w_from = Signal(n, name="w_from")
        with m.If(w_end):
            m.d.sync += [w_busy.eq(0), w_from.eq(0)]
        # As for AR: the arbiter decides from registers, ``grant_free`` (from the memory's
        # ``wready`` and ``awready``) lets the decision be taken (``aw_take``).
        arb = RoundRobinArbiter(n)
        m.submodules.aw_arbiter = EnableInserter(grant_free)(arb)
        aw_take = Signal(n, name="aw_take")
        m.d.comb += aw_take.eq(arb.grant & grant_free.replicate(n))

        aw_heads = []
        w_fifos = []
        for j, port in enumerate(ports):
            awq = FlagFifo(width=aw_layout.size, depth=self.aw_queue_depth)
            # The W slice's load enables take copies of the W buffer's registered ``w_rdy``,
            # one per slice of its control (no counter compare, no one net to every slice).
            per_slice = self._slices > 1
            wq = BufferedFlagFifo(width=w_layout.size, depth=self.write_buffer_beats + 2,
                                  ready_copies=self._slices if per_slice else 0)
            bidq = FlagFifo(width=self.id_bits, depth=self.max_writes_in_flight,
                            registered_write=True)
            bq = FlagFifo(width=2, depth=self.max_writes_in_flight)
            m.submodules[f"awq{j}"] = awq
            m.submodules[f"wq{j}"] = wq
            m.submodules[f"bidq{j}"] = bidq
            m.submodules[f"bq{j}"] = bq
            # AW and W enter through register slices (the master sits apart from its queues).
            m.submodules[f"aw_slice{j}"] = aw_slice = SkidBuffer(aw_layout)
            m.submodules[f"w_slice{j}"] = w_slice = SkidBuffer(
                w_port_layout, slices=self._slices, ready_per_slice=per_slice)
            aw_in = aw_slice.i.payload
            aw_head = data.View(aw_layout, awq.r_data)
            aw_heads.append(aw_head)
            w_in = w_slice.i.payload
            w_stored = data.View(w_layout, wq.w_data)
            w_fifos.append((wq, data.View(w_layout, wq.r_data)))

            m.d.comb += [
                aw_in.id.eq(port.awid), aw_in.addr.eq(port.awaddr), aw_in.len.eq(port.awlen),
                aw_in.size.eq(port.awsize), aw_in.burst.eq(port.awburst),
                aw_in.lock.eq(port.awlock), aw_in.cache.eq(port.awcache),
                aw_in.prot.eq(port.awprot),
                aw_slice.i.valid.eq(port.awvalid),
                port.awready.eq(aw_slice.i.ready),
                awq.w_data.eq(aw_slice.o.payload),
                awq.w_en.eq(aw_slice.o.valid),
                aw_slice.o.ready.eq(awq.w_rdy),
                w_in.data.eq(port.wdata), w_in.strb.eq(port.wstrb), w_in.last.eq(port.wlast),
                w_slice.i.valid.eq(port.wvalid),
                port.wready.eq(w_slice.i.ready),
                w_stored.data.eq(w_slice.o.payload.data),
                w_stored.strb.eq(w_slice.o.payload.strb),
                wq.w_en.eq(w_slice.o.valid),
                w_slice.o.ready.eq(wq.w_rdy),
                *(copy.eq(ready) for copy, ready in
                  zip(w_slice.out_ready_copies, wq.ready_copies)),
            ]

            # Whole bursts in the W buffer: wlast beats written, minus bursts granted.
            whole = Signal(range(self.write_buffer_beats + 3), name=f"wr{j}_whole_bursts")
            w_in_last = w_slice.o.valid & wq.w_rdy & w_slice.o.payload.last
            granted = aw_take[j]
            with m.If(w_in_last & ~granted):
                m.d.sync += whole.eq(whole + 1)
            with m.Elif(~w_in_last & granted):
                m.d.sync += whole.eq(whole - 1)
            m.d.comb += [
                arb.requests[j].eq(awq.r_rdy & (whole != 0) & bidq.w_rdy),
                awq.r_en.eq(granted),
                bidq.w_data.eq(aw_head.id),
                bidq.w_en.eq(granted),
            ]

            # B responses: the B buffer always has room (bidq bounds bursts in flight).
            b_taken = port.bvalid & port.bready
            m.d.comb += [
                bq.w_data.eq(mem.bresp),
                bq.w_en.eq(mem.bvalid & (mem.bid == j)),
                port.bvalid.eq(bq.r_rdy),
                port.bresp.eq(bq.r_data),
                port.bid.eq(bidq.r_data),
                bq.r_en.eq(port.bready),
                bidq.r_en.eq(b_taken),
            ]

        head = data.View(aw_layout, one_hot_select(arb.grant, aw_heads))
        with m.If(arb.valid & grant_free):
            m.d.sync += [mem.awvalid.eq(1), w_busy.eq(1), w_sel.eq(arb.grant_index),
                         w_from.eq(arb.grant), mem.awid.eq(arb.grant_index)]
            m.d.sync += [
                w_left.eq(head.len), mem.wlast.eq(head.len == 0),
                mem.awaddr.eq(head.addr), mem.awlen.eq(head.len), mem.awsize.eq(head.size),
                mem.awburst.eq(head.burst), mem.awlock.eq(head.lock),
                mem.awcache.eq(head.cache), mem.awprot.eq(head.prot),
            ]

        # W: the selected master's burst, beat by beat from its W buffer.
        for j, (wq, head) in enumerate(w_fifos):
            m.d.comb += wq.r_en.eq(w_from[j] & mem.wready)
        with m.Switch(w_sel):
            for j, (wq, head) in enumerate(w_fifos):
                with m.Case(j):
                    m.d.comb += [
                        mem.wvalid.eq(w_busy & wq.r_rdy),
                        mem.wdata.eq(head.data),
                        mem.wstrb.eq(head.strb),
                    ]
        m.d.comb += mem.bready.eq(1)
