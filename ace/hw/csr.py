"""The engine's AXI4-Lite register file: control, status, buffer table, instruction loading and
counter snapshots.

The register map is shared data, defined once in :mod:`ace.regmap`; the decode of
:class:`AceCsr` is built from it.

::

              s_axil (AXI4-Lite slave, 32-bit)
                  |
     AW/W latches + decode         AR: group selects + word index -> group registers -> OR
                  |                        ^                        -> rdata register
       +----------+-----------+            |
       v          v           v            |
   RW registers  CONTROL     IWORD0..7     +-- STATUS <- busy/done/error/error_* (registered)
   (node_id,     pulses      IADDR --------+-- STEPS_DONE{c} <- steps_done{c} (registered)
    buffers,     start, ...  imem_we/...   +-- snapshot bank <- counters (CONTROL.SNAPSHOT)

"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import AxiLiteSignature, AxiResp
from ace.hw.common.replica import replicas, replicates
from ace.isa import INSTR_BITS, INSTR_WORDS
from ace.regmap import (COUNTER_BITS, CSR_ADDR_BITS, FIELDS, ID_MAGIC, check_counter_names,
                        counter_offset, counter_register_names, csr_map, field,
                        params_value)

__all__ = ["AceCsr"]


# -- the hardware -------------------------------------------------------------------------------

#: RW registers that drive an output directly (register name -> member name).
_DIRECT_OUTPUTS = {"NODE_ID": "node_id", "PLACEMENT": "placement",
                   "CHANNEL_ENABLE": "channel_enable", "TIMEOUT": "timeout"}
#: CONTROL fields that drive a one-cycle output pulse (field name -> member name).
_PULSES = {"START": "start", "ERROR_CLEAR": "error_clear", "COUNTER_CLEAR": "counter_clear"}
#: Words per read group: the read's second stage picks one word of each group (one small
#: multiplexer per group, beside its registers), the third ORs the groups.
_GROUP_WORDS = 8


def _or_tree(values):
    """The OR of ``values`` as a balanced tree."""
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


_PORT_NAMES = frozenset({
    "s_axil", "node_id", "placement", "channel_enable", "timeout", "stage_base", "start",
    "error_clear",
    "counter_clear", "imem_we", "imem_channel", "imem_addr", "imem_data", "busy", "done",
    "error", "error_cause", "error_channel", "error_pc", "irq",
    *(f"buf_{kind}_{b}" for kind in ("base", "limit") for b in "ios"),
    *(f"steps_done{c}" for c in range(16)),
})


class AceCsr(wiring.Component):
    """AXI4-Lite register file of the engine (see ``docs/csr.md`` for the map).

    AXI4-Lite slave with 32-bit data. AW and W are accepted in either order or in the same
    cycle, one write and one read at a time (``awready``/``wready``/``arready`` depend only on
    internal state). A write commits at the clock edge after both AW and W were taken (latency
    :attr:`write_latency` = 2 edges from the later of the two handshakes to ``bvalid``). The low
    two address bits are ignored. Unmapped addresses answer SLVERR (reads return 0); a write to
    an RO register answers SLVERR and changes nothing; RW registers honour ``wstrb``; reading
    CONTROL returns 0.

    A read is three registered stages: an AR handshake in cycle ``t`` has ``rvalid`` high from
    cycle ``t + 3`` (:attr:`read_latency` = 3). The map is cut into groups of eight words.
    The handshake's edge registers, for each group, whether the address is in it and a copy of
    the word index within it; the next edge registers each group's word (an 8:1 multiplexer
    beside its registers, zero when not selected) with a bit saying the address is one of the
    group's registers; the third ORs the groups into ``rdata`` and ``rresp``. ``arready`` is low from the AR handshake until the R
    handshake, so reads are at most one every ``read_latency + 1`` cycles. A read returns the
    value its register holds in the cycle after the AR handshake; STATUS and STEPS_DONE are
    registered on the way in, so they read as in the AR handshake's cycle.

    Pulses (``start``, ``error_clear``, ``counter_clear``, ``imem_we``) are registered: high for
    exactly the one cycle after the commit edge, which is the first cycle of ``bvalid``. A
    SNAPSHOT write copies every counter input at the end of that cycle, the edge at which
    ``counter_clear`` clears the counters, so it holds the values of ``bvalid``'s first cycle;
    SNAPSHOT and COUNTER_CLEAR in one write read and clear atomically (the snapshot sees the
    counts before the clear, and every count is in it or in the counters after it).

    Parameters
    ----------
    config : AceConfig
    counter_names : sequence of str
        One 48-bit counter input per name, at CSR ``COUNTER_BASE + 8 * k`` in this order.

    Members
    -------
    s_axil : In(AxiLiteSignature(16, 4))
        The register port.
    node_id : Out(8)
    placement : Out(2)
        0: buffers in SRAM (ACE mode); 1: in main memory, memory-staged; 2: in main memory,
        point-to-point; 3: reserved (the channels refuse it).
    channel_enable : Out(num_channels)
    timeout : Out(32)
        Watchdog cycles, 0 = off.
    buf_base_i, buf_base_o, buf_base_s : Out(64)
    buf_limit_i, buf_limit_o, buf_limit_s : Out(32)
        Buffer sizes in words.
    stage_base : Out(64)
        ``memory`` and ``p2p`` placement: byte address of the channels' staging area.
    start, error_clear, counter_clear : Out(1)
        One-cycle pulses from CONTROL.
    imem_we : Out(1)
        One-cycle instruction write after a good IADDR write.
    imem_channel : Out(range(num_channels))
    imem_addr : Out(range(program_words))
    imem_data : Out(256)
        IWORD0 is bits 31:0. Channel, address and data are stable while ``imem_we`` is high.
    busy, done, error : In(1)
    error_cause : In(4)
        :class:`ErrorCause` of the first error.
    error_channel : In(4)
    error_pc : In(16)
    steps_done{c} : In(16)
        Per channel.
    <counter name> : In(48)
        Per name in ``counter_names``.
    irq : Out(1)
        ``done & IRQ_ENABLE.DONE | error & IRQ_ENABLE.ERROR``; combinational.
    """

    read_latency = 3
    write_latency = 2

    def __init__(self, config, counter_names=()):
        self.config = config
        try:
            self.counter_names = check_counter_names(counter_names)
            taken = _PORT_NAMES | {"config", "counter_names", "registers"} | set(dir(AceCsr))
            if set(self.counter_names) & taken:
                name = min(set(self.counter_names) & taken)
                raise ValueError(f"counter_names: {name!r} collides with a port or attribute "
                                 "of AceCsr")
        except ValueError:
            self._MustUse__silence = True  # no "created but never used" warning on top
            raise
        self.registers = csr_map(config, self.counter_names)
        C = config.num_channels
        members = {
            "s_axil": In(AxiLiteSignature(CSR_ADDR_BITS, 4)),
            "node_id": Out(8), "placement": Out(2), "channel_enable": Out(C),
            "timeout": Out(32),
            **{f"buf_base_{b}": Out(64) for b in "ios"},
            **{f"buf_limit_{b}": Out(32) for b in "ios"},
            "stage_base": Out(64),
            "start": Out(1), "error_clear": Out(1), "counter_clear": Out(1),
            "imem_we": Out(1), "imem_channel": Out(range(C)),
            "imem_addr": Out(range(config.program_words)), "imem_data": Out(INSTR_BITS),
            "busy": In(1), "done": In(1), "error": In(1), "error_cause": In(4),
            "error_channel": In(4), "error_pc": In(16),
            **{f"steps_done{c}": In(16) for c in range(C)},
            "irq": Out(1),
        }
        assert set(members) <= _PORT_NAMES
        for name in self.counter_names:
            members[name] = In(COUNTER_BITS)
        super().__init__(members)

    def counter_offset(self, name: str) -> int:
        return counter_offset(name, self.counter_names)

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        config = self.config

        # Storage of every RW register, and the value every register reads.
        store = {r.name: Signal(r.bits, init=r.reset, name=f"reg_{r.name.lower()}")
                 for r in self.registers if r.access == "RW"}
        snapshot = {name: Signal(COUNTER_BITS, name=f"snap_{name}") for name in self.counter_names}
        irq_enable = store["IRQ_ENABLE"]
        m.d.comb += self.irq.eq(self.done & irq_enable[field("IRQ_ENABLE", "DONE").lsb]
                                | self.error & irq_enable[field("IRQ_ENABLE", "ERROR").lsb])
        status_sources = {"IDLE": ~self.busy, "BUSY": self.busy, "DONE": self.done,
                          "ERROR": self.error, "ERROR_CAUSE": self.error_cause,
                          "ERROR_CHANNEL": self.error_channel, "IRQ": self.irq,
                          "ERROR_PC": self.error_pc}
        status = Signal(32)
        for f in FIELDS["STATUS"]:
            m.d.comb += status[f.lsb:f.lsb + f.width].eq(status_sources[f.name])
        read_value = {"ID": Const(ID_MAGIC, 32), "STATUS": status, "CONTROL": Const(0, 32),
                      "PARAMS": Const(params_value(config, len(self.counter_names)), 32)}
        read_value.update(store)
        for c in range(config.num_channels):
            read_value[f"STEPS_DONE{c}"] = getattr(self, f"steps_done{c}")
        for name in self.counter_names:
            lo, hi = counter_register_names(name)
            read_value[lo], read_value[hi] = snapshot[name][:32], snapshot[name][32:]

        # Outputs driven by RW registers.
        for reg, member in _DIRECT_OUTPUTS.items():
            m.d.comb += getattr(self, member).eq(store[reg])
        for b in "ios":
            m.d.comb += [
                getattr(self, f"buf_base_{b}").eq(Cat(store[f"BUF_BASE_{b.upper()}_LO"],
                                                      store[f"BUF_BASE_{b.upper()}_HI"])),
                getattr(self, f"buf_limit_{b}").eq(store[f"BUF_LIMIT_{b.upper()}"]),
            ]
        m.d.comb += self.stage_base.eq(Cat(store["STAGE_BASE_LO"], store["STAGE_BASE_HI"]))
        iaddr = store["IADDR"]
        index_field, channel_field = field("IADDR", "INDEX"), field("IADDR", "CHANNEL")
        m.d.comb += [
            self.imem_data.eq(Cat(*(store[f"IWORD{k}"] for k in range(INSTR_WORDS)))),
            self.imem_addr.eq(iaddr[index_field.lsb:index_field.lsb + index_field.width]),
            self.imem_channel.eq(iaddr[channel_field.lsb:channel_field.lsb
                                       + channel_field.width]),
        ]

        # Write channel: latch AW and W independently, commit when both are held.
        aw_full, aw_addr = Signal(name="aw_full"), Signal(CSR_ADDR_BITS, name="aw_addr")
        w_full, w_data, w_strb = Signal(name="w_full"), Signal(32, name="w_data"), \
            Signal(4, name="w_strb")
        b_valid, b_resp = Signal(name="b_valid"), Signal(2, name="b_resp")
        m.d.comb += [
            bus.awready.eq(~aw_full & ~b_valid),
            bus.wready.eq(~w_full & ~b_valid),
            bus.bvalid.eq(b_valid),
            bus.bresp.eq(b_resp),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(b_valid & bus.bready):
            m.d.sync += b_valid.eq(0)

        def merged(old):
            """``old`` with the bytes selected by ``w_strb`` replaced by ``w_data``."""
            wide = Cat(old, Const(0, 32 - len(old))) if len(old) < 32 else old
            return Cat(*(Mux(w_strb[b], w_data[8 * b:8 * b + 8], wide[8 * b:8 * b + 8])
                         for b in range(4)))

        # SNAPSHOT is a pulse too: the bank copies the counters in the pulses' cycle, at the
        # edge at which counter_clear clears them, so a count is in the snapshot or after it.
        take_snapshot = Signal(name="take_snapshot")
        for member in (*_PULSES.values(), "imem_we"):
            m.d.sync += getattr(self, member).eq(0)
        m.d.sync += take_snapshot.eq(0)
        with m.If(take_snapshot):
            for name in self.counter_names:
                m.d.sync += snapshot[name].eq(getattr(self, name))
        commit = aw_full & w_full & ~b_valid
        with m.If(commit):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), b_valid.eq(1),
                         b_resp.eq(AxiResp.OKAY)]
            with m.Switch(aw_addr[2:]):
                for reg in self.registers:
                    with m.Case(reg.offset >> 2):
                        if reg.name == "IADDR":
                            new = merged(iaddr)
                            ok = ((new[channel_field.lsb:channel_field.lsb + channel_field.width]
                                   < config.num_channels)
                                  & (new[index_field.lsb:index_field.lsb + index_field.width]
                                     < config.program_words))
                            with m.If(ok):
                                m.d.sync += [iaddr.eq(new), self.imem_we.eq(1)]
                            with m.Else():
                                m.d.sync += b_resp.eq(AxiResp.SLVERR)
                        elif reg.access == "RW":
                            m.d.sync += store[reg.name].eq(merged(store[reg.name]))
                        elif reg.name == "CONTROL":
                            control = Signal(32, name="control_write")
                            m.d.comb += control.eq(merged(Const(0, 32)))
                            for name, member in _PULSES.items():
                                m.d.sync += getattr(self, member).eq(
                                    control[field("CONTROL", name).lsb])
                            m.d.sync += take_snapshot.eq(
                                control[field("CONTROL", "SNAPSHOT").lsb])
                        else:
                            m.d.sync += b_resp.eq(AxiResp.SLVERR)
                with m.Default():
                    m.d.sync += b_resp.eq(AxiResp.SLVERR)

        # Read channel: three registered stages, one read at a time (see the class docstring).
        # Edge 1 (the AR handshake): each group's select and word index, one copy per group.
        # Edge 2: each group's value (its own registers, zero unless selected) and hit bit.
        # Edge 3: the OR of the groups into rdata, rresp, rvalid.
        # STATUS and STEPS_DONE are registered every cycle on the way in, so edge 2 takes
        # the values of the AR handshake's cycle, as a one-stage decode would.
        status_q = Signal(32, name="status_q")
        m.d.sync += status_q.eq(status)
        read_value["STATUS"] = status_q
        for c in range(config.num_channels):
            steps_q = Signal(16, name=f"steps_done{c}_q")
            m.d.sync += steps_q.eq(getattr(self, f"steps_done{c}"))
            read_value[f"STEPS_DONE{c}"] = steps_q

        r_busy = Signal(name="r_busy")           # from the AR handshake to the R handshake
        r_stage1, r_stage2 = Signal(name="r_stage1"), Signal(name="r_stage2")
        r_valid, r_data, r_resp = Signal(name="r_valid"), Signal(32, name="r_data"), \
            Signal(2, name="r_resp")
        m.d.comb += [
            bus.arready.eq(~r_busy),
            bus.rvalid.eq(r_valid),
            bus.rdata.eq(r_data),
            bus.rresp.eq(r_resp),
        ]
        ar_fire = Signal(name="ar_fire")
        m.d.comb += ar_fire.eq(bus.arvalid & ~r_busy)
        m.d.sync += [r_stage1.eq(ar_fire), r_stage2.eq(r_stage1)]
        with m.If(ar_fire):
            m.d.sync += r_busy.eq(1)
        with m.If(r_stage2):
            m.d.sync += r_valid.eq(1)
        with m.If(r_valid & bus.rready):
            m.d.sync += [r_valid.eq(0), r_busy.eq(0)]

        word = bus.araddr[2:]
        groups: dict[int, dict[int, str]] = {}   # group -> {index in the group: register}
        for reg in self.registers:
            groups.setdefault((reg.offset >> 2) // _GROUP_WORDS, {})[
                (reg.offset >> 2) % _GROUP_WORDS] = reg.name
        index_bits = (_GROUP_WORDS - 1).bit_length()
        # The word index within a group: a primary register, and a copy per group (kept
        # apart on ECP5) so that no one flip-flop drives every group's multiplexer.
        ar_index = Signal(index_bits, name="ar_index")
        index_next = Signal(index_bits, name="ar_index_next")
        m.d.comb += index_next.eq(Mux(ar_fire, word[:index_bits], ar_index))
        m.d.sync += ar_index.eq(index_next)
        copies = [replicas(m, platform, index_next[b], len(groups), name=f"ar_index{b}",
                           distinct=replicates(config, platform))
                  for b in range(index_bits)]
        # Each group's value carries, above its 32 data bits, whether the address is a register
        # of the group: the OR of the groups is the data and the hit (SLVERR when no group hit).
        group_values = []
        for k, (group, members) in enumerate(sorted(groups.items())):
            select = Signal(name=f"ar_group{group}")
            with m.If(ar_fire):
                m.d.sync += select.eq(word[index_bits:] == group)
            index = Cat(*(copies[b][k] for b in range(index_bits)))
            value = Signal(33, name=f"rd_group{group}")
            m.d.sync += value.eq(0)
            with m.If(select):
                with m.Switch(index):
                    for offset, name in members.items():
                        with m.Case(offset):
                            m.d.sync += [value[:32].eq(read_value[name]), value[32].eq(1)]
            group_values.append(value)
        read = _or_tree(group_values)
        with m.If(r_stage2):
            m.d.sync += [
                r_data.eq(read[:32]),
                r_resp.eq(Mux(read[32], AxiResp.OKAY, AxiResp.SLVERR)),
            ]
        return m
