"""The engine's AXI4-Lite register file: control, status, buffer table, instruction loading and
counter snapshots.

The register map is shared data, defined once in :mod:`ace.regmap`; the decode of
:class:`AceCsr` is built from it.

::

              s_axil (AXI4-Lite slave, 32-bit)
                  |
     AW/W latches + decode         AR decode -> rdata register
                  |                        ^
       +----------+-----------+            |
       v          v           v            |
   RW registers  CONTROL     IWORD0..7     +-- STATUS <- busy/done/error/error_*
   (node_id,     pulses      IADDR --------+-- STEPS_DONE{c} <- steps_done{c}
    buffers,     start, ...  imem_we/...   +-- snapshot bank <- counters (CONTROL.SNAPSHOT)

"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import AxiLiteSignature, AxiResp
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
    :attr:`write_latency` = 2 edges from the later of the two handshakes to ``bvalid``). A read
    answers ``rvalid`` one edge after the AR handshake (:attr:`read_latency` = 1). The low two
    address bits are ignored. Unmapped addresses answer SLVERR (reads return 0); a write to an RO
    register answers SLVERR and changes nothing; RW registers honour ``wstrb``; reading CONTROL
    returns 0.

    Pulses (``start``, ``error_clear``, ``counter_clear``, ``imem_we``) are registered: high for
    exactly the one cycle after the commit edge, which is the first cycle of ``bvalid``. A
    SNAPSHOT write copies every counter input at the commit edge, so it holds the values of the
    cycle before ``bvalid`` rises; SNAPSHOT and COUNTER_CLEAR in one write read and clear
    atomically (the snapshot sees the counts before the clear).

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

    read_latency = 1
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
        aw_full, aw_addr = Signal(), Signal(CSR_ADDR_BITS)
        w_full, w_data, w_strb = Signal(), Signal(32), Signal(4)
        b_valid, b_resp = Signal(), Signal(2)
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

        for member in (*_PULSES.values(), "imem_we"):
            m.d.sync += getattr(self, member).eq(0)
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
                            with m.If(control[field("CONTROL", "SNAPSHOT").lsb]):
                                for name in self.counter_names:
                                    m.d.sync += snapshot[name].eq(getattr(self, name))
                        else:
                            m.d.sync += b_resp.eq(AxiResp.SLVERR)
                with m.Default():
                    m.d.sync += b_resp.eq(AxiResp.SLVERR)

        # Read channel: decode at the AR handshake into the rdata register.
        r_valid, r_data, r_resp = Signal(), Signal(32), Signal(2)
        m.d.comb += [
            bus.arready.eq(~r_valid),
            bus.rvalid.eq(r_valid),
            bus.rdata.eq(r_data),
            bus.rresp.eq(r_resp),
        ]
        with m.If(r_valid & bus.rready):
            m.d.sync += r_valid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [r_valid.eq(1), r_resp.eq(AxiResp.OKAY)]
            with m.Switch(bus.araddr[2:]):
                for reg in self.registers:
                    with m.Case(reg.offset >> 2):
                        m.d.sync += r_data.eq(read_value[reg.name])
                with m.Default():
                    m.d.sync += [r_data.eq(0), r_resp.eq(AxiResp.SLVERR)]
        return m
