"""Banked SRAM buffer with a time-slotted crossbar of read and write ports, and the engine's
port map.

::

      rd0.req .. rdR.req                      wr0 .. wrW         (R read ports, W write ports)
          |        |  ready: bank == own           |     |  ready: bank == own position;
          v        v  position & credit            v     v  port j enters position j
     +----------------------+          +-----------------------------+
     | per bank: the slot   |          | write rotator (SlotRotator): |  a register, then
     | owner's row, enable  |          | position j -> (j + t) mod Pw |  ceil(log2 Pw)
     | (registered, delayed |          | = the position of the banks  |  registered 2:1
     | to meet the writes;  |          | that port j owns in cycle t; |  stages
     | last: one per slice) |          | row carried per 16-bit slice |
     +----------------------+          +-----------------------------+
          |   |   |   |                     |   |   |   |   bank b takes position b mod Pw
        +---+---+---+----+                  |   |   |   |   (its group's byte enables)
        |b0 |b1 |.. |bB-1|  <---------------+---+---+---+   B BlockRams: 1 read + 1 write
        +---+---+---+----+                                  per cycle, registered output
          |   |   |   |
     +----------------------+
     | per position q < P:  |  the word of the bank read there (one of the banks
     | word, registered     |  b = q mod P), registered beside the RAMs
     +----------------------+
          |   |   |   |
     +----------------------+
     | read rotator:        |  ceil(log2 P) levels of 2:1 muxes in one register
     | (i + t) mod P -> i   |  stage fewer (at least one); port i takes position i
     +----------------------+
          |        |
      resp FIFO  resp FIFO      one per read port, ``resp_depth`` deep (ResponseFifo)
          |        |
      rd0.resp .. rdR.resp

Addresses are word addresses; word ``a`` lives in bank ``a % banks`` at row ``a // banks``
(beat interleaving), so a port streaming sequential addresses visits every bank in turn, in
step with its time slot.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In

from ace.hw.common.bram import DP16KD_SLICE_BITS, BlockRam, is_ecp5
from ace.hw.common.replica import replicas
from ace.hw.sram.response_fifo import ResponseFifo
from ace.hw.sram.rotator import SlotRotator, rotation_levels
from ace.layouts import sram_read_signature, sram_write_signature

__all__ = ["BankedSram", "EngineSramPorts", "slot_period"]


@dataclass(frozen=True)
class EngineSramPorts:
    """Port set of one engine SRAM buffer, and which client owns which port.

    Every buffer gets the same port set so that any step can use any buffer:

    =========================  ===================================  ==========================
    port                       client                               why
    =========================  ===================================  ==========================
    ``rd{l}``, l < L           NIC TX of link ``l``                 ``s`` steps send a slice
    ``rd{L + l}``, l < L       ALU local operand for link ``l``     ``rr*`` / ``re`` reduce
    ``rd{2L}``                 DMA store (SRAM to main memory)      ``store``
    ``wr{l}``, l < L           NIC RX or ALU result of link ``l``   ``r``, ``rrc``, ``rcs``...
    ``wr{L}``                  DMA load (main memory to SRAM)       ``load``
    =========================  ===================================  ==========================

    The RX data of a link and the ALU result of that link share one write port: a beat received
    on a link is either kept as it is (``r``, ``rcs``) or reduced first (``rrc``, ``rrcs``),
    never both, so at most one word per link and cycle is written. ``rrs`` writes nothing.
    ``cpy``/``re`` use the ALU of one link: an operand read port and that link's write port.

    Parameters
    ----------
    num_links : int
        Number of network links ``L``.
    """

    num_links: int

    def __post_init__(self):
        if not isinstance(self.num_links, int) or self.num_links < 1:
            raise ValueError(f"num_links: {self.num_links!r} is not valid; "
                             "allowed: an integer of at least 1")

    @property
    def read_ports(self) -> int:
        """``2 * num_links + 1``: NIC TX and ALU operand per link, DMA store."""
        return 2 * self.num_links + 1

    @property
    def write_ports(self) -> int:
        """``num_links + 1``: NIC RX / ALU result per link, DMA load."""
        return self.num_links + 1

    def nic_tx(self, link: int) -> int:
        """Read port index of link ``link``'s NIC TX."""
        return self._link(link)

    def alu_operand(self, link: int) -> int:
        """Read port index of the local ALU operand of link ``link``."""
        return self.num_links + self._link(link)

    @property
    def dma_store(self) -> int:
        """Read port index of the DMA store (SRAM to main memory)."""
        return 2 * self.num_links

    def link_write(self, link: int) -> int:
        """Write port index of link ``link``'s NIC RX / ALU result."""
        return self._link(link)

    @property
    def dma_load(self) -> int:
        """Write port index of the DMA load (main memory to SRAM)."""
        return self.num_links

    def read_roles(self) -> list[str]:
        """Role name of each read port, by index."""
        return ([f"nic_tx{l}" for l in range(self.num_links)]
                + [f"alu_operand{l}" for l in range(self.num_links)] + ["dma_store"])

    def write_roles(self) -> list[str]:
        """Role name of each write port, by index."""
        return [f"link_write{l}" for l in range(self.num_links)] + ["dma_load"]

    def _link(self, link: int) -> int:
        if not 0 <= link < self.num_links:
            raise ValueError(f"link: {link} is out of range; allowed: 0 to {self.num_links - 1}")
        return link


def slot_period(ports: int, banks: int) -> int:
    """Cycles of the time-slot rotation of ``ports`` ports over ``banks`` banks: ``ports`` when
    there are more ports than banks, else the smallest power of two of at least ``ports`` (a
    divisor of ``banks``, so a port streaming consecutive words keeps its slot across the
    wrap from the last bank to bank 0)."""
    return ports if ports > banks else 1 << (ports - 1).bit_length()


class BankedSram(wiring.Component):
    """Beat-interleaved banked SRAM with ``read_ports`` read and ``write_ports`` write ports.

    Banks: word ``a`` lives in bank ``a % banks`` at row ``a // banks``. Each bank is a
    :class:`~ace.hw.common.bram.BlockRam` (one read and one write per cycle, registered output;
    ``DP16KD`` with output registers on ECP5).

    Time slots instead of arbitration: read port ``i`` owns bank ``b`` in cycle ``t`` when
    ``(b - t) mod P == i``, with ``P`` = :func:`slot_period` ``(read_ports, banks)``; likewise for
    writes with their own period. Each bank has at most one owner per direction and cycle, so
    there are no conflicts to resolve; the ownership is a register per port (the rotation
    position it owns, a counter), known before the request arrives. A port's ``ready`` is the
    compare of its address's bank with that position (and, for reads, a registered response
    credit, bit 0 of a thermometer code): it depends on the port's own payload and registers
    only, never on another port or on ``resp.ready``. A port that streams
    consecutive words meets its slot again in every cycle once it has one, so it moves a word per
    cycle; a port that misses its slot waits at most ``P - 1`` cycles. With more ports than banks
    each port gets ``banks / ports`` of the cycles.

    The crossbar is two rotations, not a mux per port. Read port ``i`` owns, in cycle ``t``,
    the banks at position ``q = (t + i) mod P`` (``b mod P == q``, one bank per group of
    ``P``; when ``P > banks`` positions ``banks`` and up hold no bank), so the words read in
    one cycle, one per position, reach their ports by a left rotation by ``t mod P``; the
    writes of one cycle reach their banks by the inverse rotation. A :class:`SlotRotator`
    does each rotation in ``ceil(log2 P)`` levels of 2:1 muxes (level ``k`` joins positions
    ``2**k`` apart) whose selects are free-running counters: no bank's word fans out to every
    port, and no select depends on a request. The write rotator registers each port's write
    first, as it comes (so the row, which every slice of the word needs, spreads over the
    slices in a cycle of its own), then one level per stage; the read rotator takes one stage
    fewer than its levels (its last stage holds two, a 4:1 mux per bit), so that reads, whose row
    is likewise registered once per bank before its copies per slice, keep their latency.

    Pipeline (read transferred in cycle ``t``; ``Sw`` = :attr:`write_stages`,
    ``Sr`` = :attr:`read_rotate_stages`):

    =============== ==============================================================
    t + 1           per bank: the owner's row and enable, registered
    t + Sw          the same, delayed to meet the writes of cycle ``t`` (RAM address; the
                    row's last register is one copy per slice)
    t + Sw + 2      per bank: the RAM's registered output (:attr:`BlockRam.read_latency`)
    t + Sw + 3      per position: the word of the bank read there, registered
    t + Sw + 3 + Sr per port: out of the read rotator
    + 2             per port: out of the response FIFO (``resp.valid``)
    =============== ==============================================================

    Writes go through the write rotator (``Sw`` stages, from the port's payload: row, data,
    byte enables cleared unless the write transfers, and the group of its bank; ``Sw`` is one
    register, then one stage per level) and reach the
    RAM in ``t + Sw``, the cycle in which reads transferred in ``t`` reach it. So a read and a
    write of the same word transferred in the same cycle return the **old** word to the read
    (the RAM's read-before-write), and a write transferred in ``t`` is visible to reads
    transferred in ``t + 1`` and later: the port-level order is exact, because every transfer
    takes the same fixed path.

    Reads: ``req`` carries word addresses, ``resp`` returns the words in request order. Each read
    port has a :class:`ResponseFifo` of ``resp_depth`` words; ``req.ready`` is high only while
    the FIFO has room for every read in flight, so any ``resp`` backpressure is safe.

    Per-slice control (:attr:`addr_copies`, with ``replicate``): each bank's row address comes
    as a copy per 16-bit slice (one ``DP16KD`` on ECP5), from registers of that slice only (the
    read row's last register, kept apart on ECP5; the write rotator's last stage, which carries
    the row and group per slice); the response FIFOs and the rotators' selects are per slice
    too, so no control register fans out to the whole word.

    Writes: :class:`~ace.layouts.SramWrite` (address, data, byte enables); bytes whose ``mask``
    bit is clear keep their value; an all-zero mask is accepted and changes nothing.

    Latency: :attr:`read_latency` cycles from a read's transfer to its response, at the
    earliest: ``Sw + 2 + 1 + Sr + 2``; 10 for the ``small`` top (5 read, 3 write ports, 8
    banks: ``Sw`` 3, ``Sr`` 2), 8 for the ``small`` engine's SRAM (4 read, 2 write: 2, 1).
    Throughput: one word per cycle per port on consecutive addresses (``banks / ports`` per
    port when there are more ports than banks); ``resp_depth`` of at least
    ``read_latency + 1`` keeps a read port at one word per cycle.

    Parameters
    ----------
    words : int
        Number of words; a multiple of ``banks``.
    word_bytes : int
        Bytes per word; the byte-enable mask has one bit per byte.
    banks : int
        Number of banks, a power of two.
    read_ports, write_ports : int
        Number of read and write ports, at least 1 each.
    resp_depth : int
        Depth of each read port's response FIFO, at least 2.
    replicate : bool
        Copy the control per 16 bits of the word (default: rows, FIFOs, the rotators' selects
        per slice and position); false: one copy each, the same cycles
        (:func:`~ace.hw.common.replica.replicates`).

    Members
    -------
    rd{i} : In(sram_read_signature(words, word_bytes))
        Read port ``i`` (``req`` in, ``resp`` out), for ``i`` in ``range(read_ports)``.
    wr{j} : In(sram_write_signature(words, word_bytes))
        Write port ``j``, for ``j`` in ``range(write_ports)``.
    """

    #: Register stages between a read port's transfer and the RAM's request register.
    REQUEST_STAGES = 1
    #: Register stages after the RAM's own output register, per rotation position (the word
    #: of the bank read at that position, registered beside the RAMs).
    BANK_OUTPUT_STAGES = 1
    #: Cycles from a FIFO write to its word on ``resp`` (:class:`ResponseFifo`).
    FIFO_LATENCY = ResponseFifo.latency

    def __init__(self, words: int, word_bytes: int, banks: int, read_ports: int,
                 write_ports: int, *, resp_depth: int = 16, replicate: bool = True):
        def check(name, value, ok, allowed):
            if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
                raise ValueError(f"{name}: {value!r} is not valid; allowed: {allowed}")

        check("banks", banks, lambda v: v >= 1 and v & (v - 1) == 0, "a power of two")
        check("words", words, lambda v: v >= banks and v % banks == 0,
              f"a multiple of banks ({banks})")
        check("word_bytes", word_bytes, lambda v: v >= 1, "an integer of at least 1")
        check("read_ports", read_ports, lambda v: v >= 1, "an integer of at least 1")
        check("write_ports", write_ports, lambda v: v >= 1, "an integer of at least 1")
        check("resp_depth", resp_depth, lambda v: v >= 3, "an integer of at least 3")
        self.words = words
        self.word_bytes = word_bytes
        self.banks = banks
        self.read_ports = read_ports
        self.write_ports = write_ports
        self.resp_depth = resp_depth
        self.replicate = replicate
        members = {}
        for i in range(read_ports):
            members[f"rd{i}"] = In(sram_read_signature(words, word_bytes))
        for j in range(write_ports):
            members[f"wr{j}"] = In(sram_write_signature(words, word_bytes))
        super().__init__(members)

    def _select_copies(self, width: int) -> dict:
        """A rotator's ``select_bits`` and ``position_copies``: a copy of each select per
        16 bits and output position, or one for the whole word."""
        return ({"position_copies": True} if self.replicate
                else {"select_bits": width})

    @property
    def write_stages(self) -> int:
        """Register stages from a write port to the RAM: the write rotator's, a register of
        each port's write (before it spreads over the word's slices) and one per mux level.
        Reads are delayed to reach the RAM in the same cycle."""
        return 1 + rotation_levels(slot_period(self.write_ports, self.banks))

    @property
    def read_rotate_stages(self) -> int:
        """Register stages of the read rotator (positions to ports): one fewer than its mux
        levels (two levels, a 4:1 mux, in its last stage), at least one; this gives back the
        cycle that the writes' first register (and the reads' row register per bank) takes."""
        return max(1, rotation_levels(slot_period(self.read_ports, self.banks)) - 1)

    @property
    def read_latency(self) -> int:
        """Cycles from a read request's transfer to its response becoming valid, at least."""
        return (self.write_stages + BlockRam.read_latency + self.BANK_OUTPUT_STAGES
                + self.read_rotate_stages + self.FIFO_LATENCY)

    @property
    def rows(self) -> int:
        """Words per bank."""
        return self.words // self.banks

    @property
    def row_bits(self) -> int:
        """High address bits that select the row within a bank."""
        return (self.words - 1).bit_length() - self.bank_bits

    @property
    def bank_bits(self) -> int:
        """Low address bits that select the bank."""
        return (self.banks - 1).bit_length()

    def _split(self, addr):
        """(bank, row) of a word address; bank is 0 when there is one bank."""
        return (addr[:self.bank_bits] if self.bank_bits else Const(0, 1)), addr[self.bank_bits:]

    def _slots(self, m, prefix: str, ports: int) -> list[Signal]:
        """Per port, the rotating register of the banks it owns this cycle (bit ``b``)."""
        period = slot_period(ports, self.banks)
        length = max(self.banks, period)
        slots = []
        for i in range(ports):
            pattern = sum(1 << b for b in range(length) if b % period == i)
            owned = Signal(length, init=pattern, name=f"{prefix}{i}_slots")
            m.d.sync += owned.eq(owned.rotate_left(1))
            slots.append(owned)
        return slots

    def _own_position(self, m, name: str, port: int, ports: int):
        """(position, has_bank): registers holding the rotation position ``(t + port) mod P``
        whose banks port ``port`` owns in cycle ``t``, and whether that position holds a bank
        (always, unless ``P > banks``)."""
        period = slot_period(ports, self.banks)
        position = Signal(range(period), init=port % period, name=f"{name}_position")
        has_bank = Signal(init=port % period < self.banks, name=f"{name}_has_bank")
        following = Mux(position == period - 1, 0, position + 1)
        m.d.sync += [position.eq(following), has_bank.eq(following < self.banks)]
        return position, has_bank

    def _port_bank(self, m, name: str, addr, port: int, ports: int):
        """(bank, row, one-hot bank, slot) of a port's address: ``slot`` is high when the port
        owns that bank in this cycle, a compare of the address's low bank bits with the
        port's registered position (the bank is at position ``bank mod P``), so ``ready``
        takes no mux over the slot register."""
        bank, row = self._split(addr)
        period = slot_period(ports, self.banks)
        position, has_bank = self._own_position(m, name, port, ports)
        one_hot = Signal(self.banks, name=f"{name}_bank_one_hot")
        slot = Signal(name=f"{name}_slot")
        m.d.comb += one_hot.eq(Const(1, self.banks) << bank)
        if period > self.banks:      # not a power of two: one bank per position, or none
            m.d.comb += slot.eq(has_bank & (position[:self.bank_bits] == bank))
        else:                        # P divides the banks: the low bits name the position
            low = (period - 1).bit_length()
            m.d.comb += slot.eq(position[:low] == bank[:low] if low else 1)
        return bank, row, one_hot, slot

    @staticmethod
    def _one_hot_select(selects, values):
        """OR of the ``values`` whose select bit is set (at most one is): no priority chain."""
        return reduce(operator.or_, [Mux(select, value, 0) for select, value in
                                     zip(selects, values)])

    @property
    def addr_copies(self) -> int:
        """Copies of each bank's row address (and write group), one per 16-bit slice of the
        word, the width of one ``DP16KD``; one without ``replicate`` or when the word is not a
        whole number of slices."""
        width = 8 * self.word_bytes
        return width // DP16KD_SLICE_BITS if self.replicate and not width % DP16KD_SLICE_BITS \
            else 1

    def elaborate(self, platform):
        m = Module()
        width = 8 * self.word_bytes
        rams = []
        for b in range(self.banks):
            ram = BlockRam(width, self.rows, addr_copies=self.addr_copies)
            m.submodules[f"bank{b}"] = ram
            rams.append(ram)
        self._reads(m, platform, rams)
        self._writes(m, rams)
        return m

    def _copies(self, m, platform, name: str, value, *, reset_less=False) -> list:
        """:attr:`addr_copies` registers loaded with ``value`` (kept apart on ECP5, where
        synthesis would otherwise merge them into one)."""
        copies = self.addr_copies
        if copies == 1 or not is_ecp5(platform):
            regs = [Signal.like(value, name=f"{name}_c{k}" if copies > 1 else name,
                                reset_less=reset_less) for k in range(copies)]
            m.d.sync += [reg.eq(value) for reg in regs]
            return regs
        bits = [replicas(m, platform, value[n], copies, name=f"{name}_b{n}",
                         reset_less=reset_less) for n in range(len(value))]
        return [Cat(bit[k] for bit in bits) for k in range(copies)]

    def _positions(self, period: int) -> list[list[int]]:
        """Banks at each position of a rotation over ``period`` slots: position ``q`` holds
        the banks ``b`` with ``b % period == q`` (one per group), none when ``q >= banks``."""
        return [list(range(q, self.banks, period)) for q in range(period)]

    def _delay(self, m, name: str, value, cycles: int, *, reset_less=False):
        """``value`` delayed by ``cycles`` registers."""
        for stage in range(cycles):
            delayed = Signal.like(value, name=f"{name}_{stage + 1}", reset_less=reset_less)
            m.d.sync += delayed.eq(value)
            value = delayed
        return value

    def _reads(self, m, platform, rams):
        ports = [getattr(self, f"rd{i}") for i in range(self.read_ports)]
        slots = self._slots(m, "rd", self.read_ports)
        rows, hits = [], []
        for i, port in enumerate(ports):
            _, row, one_hot, slot = self._port_bank(m, f"rd{i}", port.req.payload, i,
                                                    self.read_ports)
            credit = self._read_credit(m, i, port, slot)
            rows.append(row)
            # The bank's enable needs no ready: the bank's slot owner is unique.
            hits.append(Mux(port.req.valid & credit, one_hot, 0))

        # Per bank: the owner's row and enable, registered, then delayed so that reads reach
        # the RAM in the cycle in which the writes transferred with them do. The last row
        # register is one per address copy (per DP16KD slice), each beside its block RAMs.
        period = slot_period(self.read_ports, self.banks)
        shared = any(len(banks) > 1 for banks in self._positions(period))
        copies = self.addr_copies
        enables = []
        for b, ram in enumerate(rams):
            row = Signal(self.row_bits, name=f"bank{b}_read_row_next")
            enable = Signal(name=f"bank{b}_read_en")
            m.d.comb += row.eq(self._one_hot_select([s[b] for s in slots], rows))
            m.d.sync += enable.eq(Cat(s[b] & hit[b] for s, hit in zip(slots, hits)).any())
            extra = self.write_stages - self.REQUEST_STAGES
            enable = self._delay(m, f"bank{b}_read_en", enable, extra)
            row = self._delay(m, f"bank{b}_read_row", row, self.write_stages - 1,
                              reset_less=True)
            row_copies = self._copies(m, platform, f"bank{b}_r_addr", row, reset_less=True)
            m.d.comb += [ram.r_addr.eq(row_copies[0]) if copies == 1 else
                         ram.r_addr[k].eq(row_copy) for k, row_copy in enumerate(row_copies)]
            m.d.comb += ram.r_en.eq(enable)
            # A position shared by several banks takes the word of the one that was read: the
            # enable, a copy per slice of the word.
            if shared:
                enable = self._delay(m, f"bank{b}_read_en_out", enable,
                                     BlockRam.read_latency - 1)
                enables.append(self._copies(m, platform, f"bank{b}_read_en_out", enable))

        # Per rotation position: the word of the bank that was read there, registered beside
        # the RAMs; then the rotator brings position (i + t) mod P to port i.
        m.submodules.read_rotator = rotator = SlotRotator(
            8 * self.word_bytes, period, phase=-(self.write_stages + BlockRam.read_latency
                                                 + self.BANK_OUTPUT_STAGES),
            stages=self.read_rotate_stages, **self._select_copies(8 * self.word_bytes))
        for q, banks in enumerate(self._positions(period)):
            word = Signal(8 * self.word_bytes, name=f"position{q}_word", reset_less=True)
            if len(banks) == 1:
                m.d.sync += word.eq(rams[banks[0]].r_data)
            elif banks:
                bits = 8 * self.word_bytes // copies
                m.d.sync += word.eq(Cat(
                    self._one_hot_select([enables[b][k] for b in banks],
                                         [rams[b].r_data[bits * k:bits * (k + 1)]
                                          for b in banks])
                    for k in range(copies)))
            m.d.comb += getattr(rotator, f"i{q}").eq(word)

        for i, port in enumerate(ports):
            self._response_fifo(m, platform, i, port, getattr(rotator, f"o{i}"))

    def _response_fifo(self, m, platform, i: int, port, word):
        """Port ``i``'s response FIFO, written ``read_latency - FIFO_LATENCY`` cycles after
        each transferred request (the write enable's last register once per slice)."""
        width, copies = 8 * self.word_bytes, self.addr_copies
        taken = port.req.valid & port.req.ready
        m.submodules[f"rd{i}_resp_fifo"] = fifo = ResponseFifo(
            width, self.resp_depth, slice_bits=width // copies if copies > 1 else None)
        valid = self._delay(m, f"rd{i}_valid", taken,
                            self.read_latency - self.FIFO_LATENCY - 1)
        m.d.comb += [
            fifo.w_data.eq(word),
            fifo.w_en.eq(Cat(self._copies(m, platform, f"rd{i}_w_en", valid))),
            port.resp.payload.eq(fifo.o.payload),
            port.resp.valid.eq(fifo.o.valid),
            fifo.o.ready.eq(port.resp.ready),
        ]

    def _read_credit(self, m, i: int, port, slot):
        """Drive ``req.ready`` (own slot and a free response-FIFO entry); return the registered
        credit flag (at least one entry free for a new read)."""
        # The free entries as a thermometer code (entry k free: bit k; ``resp_depth`` bits,
        # all set at reset): a read taken shifts it down, a response popped shifts a one in,
        # so each bit's next value is a 2:1 choice of its neighbours, no adder or compare
        # behind ready, and the credit flag is bit 0.
        free = Signal(self.resp_depth, init=(1 << self.resp_depth) - 1, name=f"rd{i}_free")
        credit = free[0]
        taken = Signal(name=f"rd{i}_taken")
        popped = Signal(name=f"rd{i}_popped")
        m.d.comb += [
            port.req.ready.eq(slot & credit),
            taken.eq(port.req.valid & port.req.ready),
            popped.eq(port.resp.valid & port.resp.ready),
        ]
        with m.If(taken & ~popped):
            m.d.sync += free.eq(free >> 1)
        with m.Elif(popped & ~taken):
            m.d.sync += free.eq(Cat(1, free[:-1]))
        return credit

    def _writes(self, m, rams):
        ports = [getattr(self, f"wr{j}") for j in range(self.write_ports)]
        period = slot_period(self.write_ports, self.banks)
        positions = self._positions(period)
        group_bits = (max(len(banks) for banks in positions) - 1).bit_length()
        # One entry per slice of the word (per address copy): its own row and group beside
        # its data and byte enables, so each slice's last rotator stage drives only that
        # slice's block RAMs.
        copies = self.addr_copies
        bits, enables = 8 * self.word_bytes // copies, self.word_bytes // copies
        slice_layout = data.StructLayout({
            "row": self.row_bits, "data": bits, "mask": enables, "group": max(1, group_bits)})
        entry_layout = data.ArrayLayout(slice_layout, copies)
        # Port j's write enters position j; the rotator brings it to position (j + t) mod P,
        # the position of the banks that port j owns in cycle t. The mask is cleared unless
        # the write transfers, and the group names which of those banks it targets. The
        # rotator's selects are copied per slice.
        m.submodules.write_rotator = rotator = SlotRotator(
            entry_layout.size, period, step=-1, stages=self.write_stages,
            **(self._select_copies(entry_layout.size)
               | ({"select_bits": slice_layout.size} if copies > 1 else {})))
        for j, port in enumerate(ports):
            bank, row, _, slot = self._port_bank(m, f"wr{j}", port.payload.addr, j,
                                                 self.write_ports)
            entry = Signal(entry_layout, name=f"wr{j}_entry")
            mask = Mux(port.valid & slot, port.payload.mask, 0)
            m.d.comb += [port.ready.eq(slot), getattr(rotator, f"i{j}").eq(entry)]
            for k in range(copies):
                m.d.comb += [
                    entry[k].row.eq(row),
                    entry[k].data.eq(port.payload.data[bits * k:bits * (k + 1)]),
                    entry[k].mask.eq(mask[enables * k:enables * (k + 1)]),
                    entry[k].group.eq(bank[self.bank_bits - group_bits:]),
                ]
        for q, banks in enumerate(positions):
            entry = data.View(entry_layout, getattr(rotator, f"o{q}"))
            for g, b in enumerate(banks):
                m.d.comb += [
                    rams[b].w_data.eq(Cat(entry[k].data for k in range(copies))),
                    rams[b].w_en.eq(Cat(entry[k].mask if len(banks) == 1
                                        else Mux(entry[k].group == g, entry[k].mask, 0)
                                        for k in range(copies))),
                ]
                m.d.comb += [rams[b].w_addr.eq(entry[0].row) if copies == 1 else
                             rams[b].w_addr[k].eq(entry[k].row) for k in range(copies)]
