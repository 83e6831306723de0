"""Banked SRAM buffer with a crossbar of read and write ports, and the engine's port map.

::

      rd0.req ..rdR.req            wr0 .. wrW                    (R read ports, W write ports)
          |       |                  |      |
          v       v                  v      v
     +-------------------+   +-------------------+
     | read arbiter per  |   | write arbiter per |    round-robin, one grant per bank and cycle
     | bank (bank=a % B) |   | bank (bank=a % B) |
     +-------------------+   +-------------------+
          |   |   |   |           |   |   |   |
        +---+---+---+---+       (write ports of the same banks)
        |b0 |b1 |.. |bB-1|   B banks, each a simple-dual-port memory: 1 read + 1 write per cycle
        +---+---+---+---+
          |   |   |   |
     +-------------------+
     | data mux per port |   selects the bank granted to the port one cycle earlier
     +-------------------+
          |       |
      resp FIFO  resp FIFO     one per read port, depth ``resp_depth``, credit-checked
          |       |
      rd0.resp .. rdR.resp

Addresses are word addresses; word ``a`` lives in bank ``a % banks`` at row ``a // banks``
(beat interleaving), so a port streaming sequential addresses visits every bank in turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from ace.hw.common.arbiter import RoundRobinArbiter
from ace.layouts import sram_read_signature, sram_write_signature

__all__ = ["BankedSram", "EngineSramPorts"]


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


class BankedSram(wiring.Component):
    """Beat-interleaved banked SRAM with ``read_ports`` read and ``write_ports`` write ports.

    Each bank is a simple-dual-port memory (one read and one write per cycle, synchronous read),
    which maps to FPGA block RAM. Word ``a`` lives in bank ``a % banks``. Each bank has a
    :class:`~ace.hw.common.arbiter.RoundRobinArbiter` among the read ports that address it and another
    among the write ports, so per cycle each bank serves one read and one write, from any ports.
    A port that loses arbitration keeps ``ready`` low and is served later; no request is dropped.

    Reads: a read port's ``req`` carries word addresses and its ``resp`` returns the data words in
    request order. Each read port has a response FIFO of ``resp_depth`` words; ``req.ready`` is
    high only if the FIFO has room for the response (FIFO level plus the read in flight is below
    ``resp_depth``), so any amount of ``resp`` backpressure is safe.

    Writes: a write port's payload is :class:`~ace.layouts.SramWrite` (address, data, byte
    enables). Bytes whose ``mask`` bit is clear keep their value; a write with an all-zero mask is
    accepted and changes nothing.

    Latency: a read request transferred in cycle ``t`` has its response valid in cycle
    ``t + 2`` at the earliest (:attr:`read_latency`; one cycle in the bank, one in the response
    FIFO). A write transferred in cycle ``t`` is visible to reads transferred in cycle ``t + 1``
    and later.

    Same address in the same cycle: a read and a write of the same word transferred in the same
    cycle (necessarily the same bank) return the **old** data to the read (read-before-write,
    non-transparent read port); the write takes effect at the end of the cycle.

    Throughput: each port moves up to one word per cycle. Per cycle at most ``banks`` reads and
    ``banks`` writes proceed. When ports stream sequential addresses with no backpressure, round
    robin settles into a conflict-free rotation after a few cycles (each losing port falls one
    bank behind the winner and then never meets it again), so with ``read_ports <= banks`` every
    read port sustains one word per cycle, and likewise for writes. With more streaming ports
    than banks the banks saturate and are shared fairly (``banks / ports`` per port). A
    ``resp_depth`` below 3 caps a read port below one word per cycle.

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
        Depth of each read port's response FIFO, at least 1; 3 or more gives full throughput.

    Members
    -------
    rd{i} : In(sram_read_signature(words, word_bytes))
        Read port ``i`` (``req`` in, ``resp`` out), for ``i`` in ``range(read_ports)``.
    wr{j} : In(sram_write_signature(words, word_bytes))
        Write port ``j``, for ``j`` in ``range(write_ports)``.
    """

    def __init__(self, words: int, word_bytes: int, banks: int, read_ports: int,
                 write_ports: int, *, resp_depth: int = 4):
        def check(name, value, ok, allowed):
            if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
                raise ValueError(f"{name}: {value!r} is not valid; allowed: {allowed}")

        check("banks", banks, lambda v: v >= 1 and v & (v - 1) == 0, "a power of two")
        check("words", words, lambda v: v >= banks and v % banks == 0,
              f"a multiple of banks ({banks})")
        check("word_bytes", word_bytes, lambda v: v >= 1, "an integer of at least 1")
        check("read_ports", read_ports, lambda v: v >= 1, "an integer of at least 1")
        check("write_ports", write_ports, lambda v: v >= 1, "an integer of at least 1")
        check("resp_depth", resp_depth, lambda v: v >= 1, "an integer of at least 1")
        self.words = words
        self.word_bytes = word_bytes
        self.banks = banks
        self.read_ports = read_ports
        self.write_ports = write_ports
        self.resp_depth = resp_depth
        members = {}
        for i in range(read_ports):
            members[f"rd{i}"] = In(sram_read_signature(words, word_bytes))
        for j in range(write_ports):
            members[f"wr{j}"] = In(sram_write_signature(words, word_bytes))
        super().__init__(members)

    @property
    def read_latency(self) -> int:
        """Cycles from a read request's transfer to its response becoming valid, at least."""
        return 2

    @property
    def rows(self) -> int:
        """Words per bank."""
        return self.words // self.banks

    @property
    def bank_bits(self) -> int:
        """Low address bits that select the bank."""
        return (self.banks - 1).bit_length()

    def _decode(self, m, bank, targets, value, name):
        """Drive ``targets[bank]`` with ``value`` and the other targets with 0."""
        one_hot = Signal(self.banks, name=name)
        m.d.comb += one_hot.eq(Const(1, self.banks) << bank)
        for b, target in enumerate(targets):
            m.d.comb += target.eq(value & one_hot[b])

    def elaborate(self, platform):
        m = Module()
        width = 8 * self.word_bytes
        bank_bits = self.bank_bits

        def split(addr):
            """(bank, row) of a word address; bank is 0 when there is one bank."""
            bank = addr[:bank_bits] if bank_bits else 0
            return bank, addr[bank_bits:]

        read_ports, write_ports = [], []
        for b in range(self.banks):
            memory = Memory(shape=unsigned(width), depth=self.rows, init=[])
            m.submodules[f"bank{b}"] = memory
            read_ports.append(memory.read_port(transparent_for=()))
            write_ports.append(memory.write_port(granularity=8))

        # -- reads -----------------------------------------------------------------------------
        rd = [getattr(self, f"rd{i}") for i in range(self.read_ports)]
        rd_arbiters = []
        for b in range(self.banks):
            arbiter = RoundRobinArbiter(self.read_ports)
            m.submodules[f"rd_arbiter{b}"] = arbiter
            rd_arbiters.append(arbiter)

        rd_rows = []
        for i, port in enumerate(rd):
            bank, row = split(port.req.payload)
            rd_rows.append(row)
            fifo = SyncFIFO(width=width, depth=self.resp_depth)
            m.submodules[f"rd{i}_resp_fifo"] = fifo
            in_flight = Signal(name=f"rd{i}_in_flight")
            in_flight_bank = Signal(range(self.banks), name=f"rd{i}_in_flight_bank")
            credit = Signal(name=f"rd{i}_credit")
            granted = Signal(name=f"rd{i}_granted")
            m.d.comb += credit.eq(fifo.level + in_flight < self.resp_depth)
            self._decode(m, bank, [arbiter.requests[i] for arbiter in rd_arbiters],
                         port.req.valid & credit, f"rd{i}_bank_one_hot")
            m.d.comb += [
                granted.eq(Cat(arbiter.grant[i] for arbiter in rd_arbiters).any()),
                port.req.ready.eq(granted),
            ]
            m.d.sync += [
                in_flight.eq(port.req.valid & granted),
                in_flight_bank.eq(bank),
            ]
            # The bank granted in the previous cycle presents this port's word now.
            with m.Switch(in_flight_bank):
                for b in range(self.banks):
                    with m.Case(b) if b < self.banks - 1 else m.Default():
                        m.d.comb += fifo.w_data.eq(read_ports[b].data)
            m.d.comb += [
                fifo.w_en.eq(in_flight),
                port.resp.payload.eq(fifo.r_data),
                port.resp.valid.eq(fifo.r_rdy),
                fifo.r_en.eq(port.resp.ready),
            ]

        for b, (arbiter, bank_port) in enumerate(zip(rd_arbiters, read_ports)):
            m.d.comb += bank_port.en.eq(arbiter.valid)
            with m.Switch(arbiter.grant_index):
                for i in range(self.read_ports):
                    with m.Case(i) if i < self.read_ports - 1 else m.Default():
                        m.d.comb += bank_port.addr.eq(rd_rows[i])

        # -- writes ----------------------------------------------------------------------------
        wr = [getattr(self, f"wr{j}") for j in range(self.write_ports)]
        wr_arbiters = []
        for b in range(self.banks):
            arbiter = RoundRobinArbiter(self.write_ports)
            m.submodules[f"wr_arbiter{b}"] = arbiter
            wr_arbiters.append(arbiter)

        for j, port in enumerate(wr):
            bank, _ = split(port.payload.addr)
            granted = Signal(name=f"wr{j}_granted")
            self._decode(m, bank, [arbiter.requests[j] for arbiter in wr_arbiters], port.valid,
                         f"wr{j}_bank_one_hot")
            m.d.comb += [
                granted.eq(Cat(arbiter.grant[j] for arbiter in wr_arbiters).any()),
                port.ready.eq(granted),
            ]

        for b, (arbiter, bank_port) in enumerate(zip(wr_arbiters, write_ports)):
            with m.If(arbiter.valid):
                with m.Switch(arbiter.grant_index):
                    for j, port in enumerate(wr):
                        with m.Case(j) if j < self.write_ports - 1 else m.Default():
                            _, row = split(port.payload.addr)
                            m.d.comb += [
                                bank_port.addr.eq(row),
                                bank_port.data.eq(port.payload.data),
                                bank_port.en.eq(port.payload.mask),
                            ]
        return m
