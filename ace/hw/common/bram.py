"""Simple dual-port block RAM with a registered output, and its ECP5 ``DP16KD`` form.

::

    w_addr, w_data, w_en (byte enables) --> write ----+
                                                      |  depth x width
    r_addr, r_en --> address register --> array --> output register --> r_data
                     (cycle t)                        (cycle t + 1)      (valid in t + 2)

Two forms with the same ports, latency and behaviour, chosen by the platform passed to
``elaborate``:

* **ECP5** (``platform.family == "ecp5"``, e.g. an amaranth-boards ULX3S platform given to
  ``verilog.convert(..., platform=...)``): ``DP16KD`` primitives in true dual-port 1024 x 18 mode,
  one per 16 bits of width, with both output registers on (``REGMODE="OUTREG"``). Yosys does not
  absorb a RAM's output register into ``DP16KD``, and for an inferred RAM it adds read-first
  emulation (writes delayed a cycle, a bypass mux on every read bit), so the primitive is
  instantiated here. Port A writes in ``READBEFOREWRITE`` mode and so reads the old word at the
  address it writes; port B reads. A same-address read and write (whose result on port B the
  device does not define) take their data from port A instead: a 10-bit compare, two
  flip-flops per ``DP16KD`` (the select of its 16 bits: a collision counts for a slice only
  when that slice's byte enables write) and a 2:1 mux after the output registers. Port B
  reads in every cycle (``r_en`` is not needed: ``r_data`` is defined only after a read).
* **Any other platform, or none** (simulation, ``ace generate``, Xilinx): an
  :class:`amaranth.lib.memory.Memory` with a non-transparent synchronous read port, followed by
  an output register (one ``Memory`` per address copy).

Address copies (``addr_copies``): the rows can come as several copies, each for its own slice
of the word (``width // addr_copies`` bits), so that a register per slice, placed beside that
slice's block RAMs, drives each copy instead of one register driving every block RAM of the
word across the die. The copies are meant to be equal; each slice is written and read at its
own copy's row (and the ECP5 form compares each slice's own copies for its collision).

The platform is the selector because vendor primitives belong to the flow that maps to the
vendor: the same design elaborated without a platform stays portable Verilog.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["BlockRam", "WideBlockRam", "DP16KD_ROWS", "DP16KD_SLICE_BITS", "DP16KD_WIDE_ROWS",
           "DP16KD_WIDE_BITS"]

#: Rows of one ``DP16KD`` in 1024 x 18 mode, the deepest mode with two 9-bit byte enables.
DP16KD_ROWS = 1024
#: Data bits kept per ``DP16KD``: two 8-bit bytes, one in each 9-bit lane.
DP16KD_SLICE_BITS = 16


def is_ecp5(platform) -> bool:
    """Whether ``platform`` maps to Lattice ECP5 (amaranth's ``LatticePlatform`` family)."""
    return getattr(platform, "family", None) == "ecp5"


class BlockRam(wiring.Component):
    """Simple dual-port RAM: one write port, one read port, registered read data.

    Latency: a read enabled in cycle ``t`` (``r_en`` high, ``r_addr``) has its word on ``r_data``
    in cycle ``t + 2`` (:attr:`read_latency`: the address register, then the output register).
    ``r_data`` is defined only in that cycle; at other times its value is unspecified.
    Throughput: one read and one write per cycle, at any addresses.

    Writes: bytes whose ``w_en`` bit is set in cycle ``t`` hold ``w_data`` from the end of
    cycle ``t``; a read enabled in ``t + 1`` or later sees them.

    Collision: a read and a write of the same address in the same cycle return the **old** word
    to the read (read-before-write), in both forms.

    Parameters
    ----------
    width : int
        Bits per word, a multiple of ``granularity``.
    depth : int
        Words; at most :data:`DP16KD_ROWS` in the ECP5 form (it does not cascade in depth).
    granularity : int
        Bits per write enable (8: byte enables).
    addr_copies : int
        Copies of ``w_addr`` and ``r_addr``, one per slice of ``width // addr_copies`` bits
        (a whole number of enables; in the ECP5 form a multiple of 16 bits unless 1).

    Members
    -------
    w_addr : In(range(depth)), or In(ArrayLayout(range(depth), addr_copies)) when
        ``addr_copies > 1`` (copy ``k`` addresses bits ``k * width // addr_copies`` and up)
    w_data : In(width)
    w_en : In(width // granularity), one enable per ``granularity`` bits
    r_addr : the shape of ``w_addr``
    r_en : In(1)
    r_data : Out(width)
    """

    read_latency = 2

    def __init__(self, width: int, depth: int, *, granularity: int = 8, addr_copies: int = 1):
        for name, value in (("width", width), ("depth", depth), ("granularity", granularity),
                            ("addr_copies", addr_copies)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"BlockRam {name}: {value!r} is not valid; allowed: an integer "
                                 "of at least 1")
        if width % granularity:
            raise ValueError(f"BlockRam width: {width} is not a multiple of granularity "
                             f"({granularity})")
        if (width // granularity) % addr_copies:
            raise ValueError(f"BlockRam addr_copies: {addr_copies} does not divide the "
                             f"{width // granularity} enables of the word")
        self.width = width
        self.depth = depth
        self.granularity = granularity
        self.addr_copies = addr_copies
        addr = range(depth) if addr_copies == 1 else data.ArrayLayout(range(depth), addr_copies)
        super().__init__({
            "w_addr": In(addr),
            "w_data": In(width),
            "w_en": In(width // granularity),
            "r_addr": In(addr),
            "r_en": In(1),
            "r_data": Out(width),
        })

    @property
    def copy_bits(self) -> int:
        """Bits of the word addressed by one copy of the address."""
        return self.width // self.addr_copies

    def _addr(self, addr, k: int):
        """Copy ``k`` of an address port (the port itself when there is one copy)."""
        return addr if self.addr_copies == 1 else addr[k]

    @property
    def dp16kd_count(self) -> int:
        """``DP16KD`` primitives of the ECP5 form."""
        return -(-self.width // DP16KD_SLICE_BITS)

    def elaborate(self, platform):
        if is_ecp5(platform):
            return self._elaborate_dp16kd()
        return self._elaborate_memory()

    def _elaborate_memory(self):
        m = Module()
        bits, enables = self.copy_bits, self.copy_bits // self.granularity
        for k in range(self.addr_copies):
            memory = Memory(shape=unsigned(bits), depth=self.depth, init=[])
            m.submodules["memory" if self.addr_copies == 1 else f"memory{k}"] = memory
            write = memory.write_port(granularity=self.granularity)
            read = memory.read_port(transparent_for=())
            m.d.comb += [
                write.addr.eq(self._addr(self.w_addr, k)),
                write.data.eq(self.w_data[bits * k:bits * (k + 1)]),
                write.en.eq(self.w_en[enables * k:enables * (k + 1)]),
                read.addr.eq(self._addr(self.r_addr, k)), read.en.eq(self.r_en),
            ]
            m.d.sync += self.r_data[bits * k:bits * (k + 1)].eq(read.data)  # output register
        return m

    def _elaborate_dp16kd(self):
        if self.depth > DP16KD_ROWS:
            raise ValueError(f"BlockRam depth: {self.depth} exceeds {DP16KD_ROWS}, the rows of "
                             "one DP16KD at 18 bits; the ECP5 form does not cascade in depth")
        if self.granularity != 8:
            raise ValueError(f"BlockRam granularity: {self.granularity}; the ECP5 form needs 8 "
                             "(DP16KD byte enables)")
        if self.addr_copies > 1 and self.copy_bits % DP16KD_SLICE_BITS:
            raise ValueError(f"BlockRam addr_copies: {self.addr_copies} copies of "
                             f"{self.copy_bits} bits; the ECP5 form needs a multiple of "
                             f"{DP16KD_SLICE_BITS} bits per copy (one row per DP16KD)")
        m = Module()
        slices = self.dp16kd_count
        padded = slices * DP16KD_SLICE_BITS
        w_data = Signal(padded, name="w_data_padded")
        w_en = Signal(padded // 8, name="w_en_padded")
        port_a = Signal(padded, name="port_a_data")  # old word at w_addr
        port_b = Signal(padded, name="port_b_data")  # word at r_addr
        m.d.comb += [w_data.eq(self.w_data), w_en.eq(self.w_en)]

        # Per DP16KD: its copy of the rows (the copy that addresses its bits).
        rows_a, rows_b = [], []
        for s in range(slices):
            k = s * DP16KD_SLICE_BITS // self.copy_bits
            row_a = Signal(10, name=f"row_a{s}")
            row_b = Signal(10, name=f"row_b{s}")
            m.d.comb += [row_a.eq(self._addr(self.w_addr, k)),
                         row_b.eq(self._addr(self.r_addr, k))]
            rows_a.append(row_a)
            rows_b.append(row_b)

        # Per DP16KD: the read takes port A's slice when it met a write of that slice at its
        # address (two cycles ago). One select per slice keeps each select's fan-out at 16
        # muxes beside its block RAM. Port B reads in every cycle, so the compare needs no
        # r_en (r_data is defined only after a read).
        selects = []
        for s in range(slices):
            collide = Signal(name=f"collide{s}")
            collide_out = Signal(name=f"collide{s}_out")
            m.d.sync += [collide.eq((rows_a[s] == rows_b[s]) & w_en[2 * s:2 * s + 2].any()),
                         collide_out.eq(collide)]
            selects.append(collide_out)
        m.d.comb += self.r_data.eq(Cat(
            Mux(select, port_a[bits], port_b[bits]) for select, bits in zip(
                selects, (slice(DP16KD_SLICE_BITS * s, DP16KD_SLICE_BITS * (s + 1))
                          for s in range(slices)))))

        for s in range(slices):
            bits = slice(DP16KD_SLICE_BITS * s, DP16KD_SLICE_BITS * (s + 1))
            byte_en = w_en[2 * s:2 * s + 2]
            m.submodules[f"dp16kd{s}"] = Instance(
                "DP16KD",
                **self._dp16kd_parameters(),
                i_CLKA=ClockSignal(), i_CLKB=ClockSignal(),
                i_CEA=Const(1), i_OCEA=Const(1), i_RSTA=Const(0), i_WEA=byte_en.any(),
                i_CEB=Const(1), i_OCEB=Const(1), i_RSTB=Const(0), i_WEB=Const(0),
                **self._dp16kd_address("A", rows_a[s], byte_en),
                **self._dp16kd_address("B", rows_b[s], Const(0, 2)),
                **self._dp16kd_data("DIA", w_data[bits], "i"),
                **self._dp16kd_data("DIB", Const(0, DP16KD_SLICE_BITS), "i"),
                **self._dp16kd_data("DOA", port_a[bits], "o"),
                **self._dp16kd_data("DOB", port_b[bits], "o"),
            )
        return m

    @staticmethod
    def _dp16kd_parameters() -> dict:
        params = {"DATA_WIDTH_A": 18, "DATA_WIDTH_B": 18, "REGMODE_A": "OUTREG",
                  "REGMODE_B": "OUTREG", "WRITEMODE_A": "READBEFOREWRITE",
                  "WRITEMODE_B": "NORMAL", "RESETMODE": "SYNC", "ASYNC_RESET_RELEASE": "SYNC",
                  "CSDECODE_A": "0b000", "CSDECODE_B": "0b000", "CLKAMUX": "CLKA",
                  "CLKBMUX": "CLKB", "GSR": "DISABLED"}
        return {f"p_{name}": value for name, value in params.items()}

    @staticmethod
    def _dp16kd_address(port: str, row, byte_en) -> dict:
        """``AD{port}0..13`` in 18-bit mode: byte enables in bits 0-1, the row in bits 4-13."""
        bits = {0: byte_en[0], 1: byte_en[1], 2: Const(0), 3: Const(0)}
        bits.update({4 + k: row[k] for k in range(10)})
        pins = {f"i_AD{port}{k}": bit for k, bit in bits.items()}
        pins.update({f"i_CS{port}{k}": Const(0) for k in range(3)})
        return pins

    @staticmethod
    def _dp16kd_data(pin: str, value, direction: str) -> dict:
        """18 data pins: two 9-bit lanes, each carrying one byte in its low 8 bits."""
        pins = {}
        for lane in range(2):
            for k in range(9):
                bit = value[8 * lane + k] if k < 8 else None
                name = f"{direction}_{pin}{9 * lane + k}"
                if bit is not None:
                    pins[name] = bit
                elif direction == "i":
                    pins[name] = Const(0)
        return pins


#: Rows of one ``DP16KD`` in its 512 x 36 pseudo-dual-port mode.
DP16KD_WIDE_ROWS = 512
#: Data bits per ``DP16KD`` in that mode (four 9-bit lanes, every bit kept).
DP16KD_WIDE_BITS = 36


class WideBlockRam(wiring.Component):
    """Simple dual-port RAM of whole words, 36 bits per block RAM, with a stallable read.

    For a wide, shallow memory that only ever reads words written at least a cycle before
    (a FIFO): the ECP5 form uses ``DP16KD`` in its 512 x 36 pseudo-dual-port mode (the mode
    yosys maps a 36-bit ``$__PDPW16KD_`` to: port A writes, port B reads), ``ceil(width / 36)``
    primitives instead of :class:`BlockRam`'s ``ceil(width / 16)``, with no collision logic
    and no multiplexer after the output registers. The read is a two-stage pipeline (the
    RAM's address register, then its output register) that advances only in cycles with
    ``r_en`` high (``CEB`` and ``OCEB``), so a consumer can stall it with one signal that
    reaches the block RAMs' clock enables instead of a register per data bit.

    Latency: a read whose address is taken in a cycle ``t`` with ``r_en`` (stage 1) has its
    word on ``r_data`` from the cycle after the next cycle with ``r_en`` (stage 2), held there
    until the cycle after the following one with ``r_en``. With ``r_en`` always high: the word
    at ``r_addr`` in cycle ``t`` is on ``r_data`` in ``t + 2`` (:attr:`read_latency`).
    Writes: ``w_data`` is written at ``w_addr`` at the end of a cycle with ``w_en`` high; a read
    whose address is taken in a later cycle sees it.

    Collision: a read whose address is taken in the cycle that address is written returns an
    **unspecified** word (the device does not define it; the Memory form returns the old
    word). A word once read is held by the pipeline whatever is written afterwards. The
    caller must not use a colliding read.

    Parameters
    ----------
    width : int
    depth : int
        At most :data:`DP16KD_WIDE_ROWS` in the ECP5 form.

    Members
    -------
    w_addr : In(range(depth))
    w_data : In(width)
    w_en : In(1)
    r_addr : In(range(depth))
    r_en : In(1)
        The read pipeline advances (both stages).
    r_data : Out(width)
    """

    read_latency = 2

    def __init__(self, width: int, depth: int):
        for name, value in (("width", width), ("depth", depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WideBlockRam {name}: {value!r} is not valid; allowed: an "
                                 "integer of at least 1")
        self.width = width
        self.depth = depth
        super().__init__({
            "w_addr": In(range(depth)),
            "w_data": In(width),
            "w_en": In(1),
            "r_addr": In(range(depth)),
            "r_en": In(1),
            "r_data": Out(width),
        })

    @property
    def dp16kd_count(self) -> int:
        """``DP16KD`` primitives of the ECP5 form."""
        return -(-self.width // DP16KD_WIDE_BITS)

    def elaborate(self, platform):
        if is_ecp5(platform):
            return self._elaborate_dp16kd()
        m = Module()
        m.submodules.memory = memory = Memory(shape=unsigned(self.width), depth=self.depth,
                                              init=[])
        write = memory.write_port()
        read = memory.read_port(transparent_for=())
        m.d.comb += [
            write.addr.eq(self.w_addr), write.data.eq(self.w_data), write.en.eq(self.w_en),
            read.addr.eq(self.r_addr), read.en.eq(self.r_en),
        ]
        with m.If(self.r_en):
            m.d.sync += self.r_data.eq(read.data)  # the output register
        return m

    def _elaborate_dp16kd(self):
        if self.depth > DP16KD_WIDE_ROWS:
            raise ValueError(f"WideBlockRam depth: {self.depth} exceeds {DP16KD_WIDE_ROWS}, the "
                             "rows of one DP16KD at 36 bits; the ECP5 form does not cascade")
        m = Module()
        n = self.dp16kd_count
        lane = DP16KD_WIDE_BITS // 2
        w_data = Signal(n * DP16KD_WIDE_BITS, name="w_data_padded")
        r_data = Signal(n * DP16KD_WIDE_BITS, name="r_data_padded")
        m.d.comb += [w_data.eq(self.w_data), self.r_data.eq(r_data[:self.width])]
        row_w = Signal(9, name="row_w")
        row_r = Signal(9, name="row_r")
        m.d.comb += [row_w.eq(self.w_addr), row_r.eq(self.r_addr)]
        params = {"DATA_WIDTH_A": 36, "DATA_WIDTH_B": 36, "REGMODE_A": "OUTREG",
                  "REGMODE_B": "OUTREG", "WRITEMODE_A": "NORMAL", "WRITEMODE_B": "NORMAL",
                  "RESETMODE": "SYNC", "ASYNC_RESET_RELEASE": "SYNC", "CSDECODE_A": "0b000",
                  "CSDECODE_B": "0b000", "CLKAMUX": "CLKA", "CLKBMUX": "CLKB", "GSR": "DISABLED"}
        for s in range(n):
            word = slice(DP16KD_WIDE_BITS * s, DP16KD_WIDE_BITS * (s + 1))
            wd, rd = w_data[word], r_data[word]
            pins = {f"p_{k}": v for k, v in params.items()}
            # Port A writes (byte enables in ADA0..3, as yosys maps a 36-bit write), port B
            # reads (its clock enables advance the read, both halves of the word, as
            # PDPW16KD's CER and OCER); a word is {DIB, DIA} and {DOB, DOA}; the row is in
            # AD*5..13.
            for k in range(4):
                pins[f"i_ADA{k}"] = self.w_en
                pins[f"i_ADB{k}"] = Const(0)
            pins["i_ADA4"] = Const(0)
            pins["i_ADB4"] = Const(0)
            for k in range(9):
                pins[f"i_ADA{5 + k}"] = row_w[k]
                pins[f"i_ADB{5 + k}"] = row_r[k]
            for k in range(3):
                pins[f"i_CSA{k}"] = Const(0)
                pins[f"i_CSB{k}"] = Const(0)
            for k in range(lane):
                pins[f"i_DIA{k}"] = wd[k]
                pins[f"i_DIB{k}"] = wd[lane + k]
                pins[f"o_DOA{k}"] = rd[k]
                pins[f"o_DOB{k}"] = rd[lane + k]
            m.submodules[f"dp16kd{s}"] = Instance(
                "DP16KD", **pins,
                i_CLKA=ClockSignal(), i_CLKB=ClockSignal(),
                i_CEA=Const(1), i_OCEA=self.r_en, i_RSTA=Const(0), i_WEA=Const(1),
                i_CEB=self.r_en, i_OCEB=self.r_en, i_RSTB=Const(0), i_WEB=Const(0))
        return m
