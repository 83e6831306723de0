"""The storage array of the memory model: Amaranth ``Memory``, a behavioural Verilog RAM, or a
RAM whose words live in the C++ harness driver (DPI).

Amaranth writes every word of a ``Memory``'s initial contents into the Verilog it emits, so a
1 MiB array becomes megabytes of ``initial`` statements that Verilator must then compile. For
system builds the array is therefore a small hand-written Verilog module
(:data:`SIM_RAM_VERILOG`, instantiated through ``Instance``) with the same ports and timing;
the Amaranth simulator, which cannot run Verilog, uses the ``Memory`` form. The harness driver
(:mod:`sim_harness.simulator`) uses the DPI form (:data:`SIM_RAM_DPI_VERILOG`): the array is a
byte vector per node inside the driver, reached through the DPI functions ``ace_ram_read32`` and
``ace_ram_write32``, so loading or reading back a memory image costs no simulated cycles.

Ports: write port 0 with a byte mask, write port 1 for whole words, read port 0 with an enable
(the output holds while it is low) and read port 1 always enabled. Reads are synchronous (one
cycle) and return the old word when the same cycle writes it.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["SimRam", "SIM_RAM_MODULE", "SIM_RAM_VERILOG", "SIM_RAM_DPI_MODULE",
           "SIM_RAM_DPI_VERILOG"]

SIM_RAM_MODULE = "ace_sim_ram"
SIM_RAM_DPI_MODULE = "ace_sim_ram_dpi"

SIM_RAM_VERILOG = """\
// Behavioural RAM of the ACE system model (sim_harness/sim_ram.py). No initial contents.
module ace_sim_ram #(parameter WORDS = 1024, parameter BYTES = 16, parameter ABITS = 10) (
    input clk,
    input [ABITS-1:0] w0_addr, input [8*BYTES-1:0] w0_data, input [BYTES-1:0] w0_en,
    input [ABITS-1:0] w1_addr, input [8*BYTES-1:0] w1_data, input w1_en,
    input [ABITS-1:0] r0_addr, input r0_en, output reg [8*BYTES-1:0] r0_data,
    input [ABITS-1:0] r1_addr, output reg [8*BYTES-1:0] r1_data);
  reg [8*BYTES-1:0] mem [0:WORDS-1];
  integer b;
  always @(posedge clk) begin
    if (r0_en) r0_data <= mem[r0_addr];
    r1_data <= mem[r1_addr];
    for (b = 0; b < BYTES; b = b + 1)
      if (w0_en[b]) mem[w0_addr][8*b +: 8] <= w0_data[8*b +: 8];
    if (w1_en) mem[w1_addr] <= w1_data;
  end
endmodule
"""

# The same ports and timing; reads come before writes in the one clocked block, so a read
# returns the old word when the same cycle writes it. Read port 1 (the backdoor) reads zeros:
# the driver reaches the words directly.
SIM_RAM_DPI_VERILOG = """\
// ACE system-model RAM whose words live in the C++ harness driver (sim_harness/sim_ram.py).
module ace_sim_ram_dpi #(parameter WORDS = 1024, parameter BYTES = 16, parameter ABITS = 10,
                         parameter NODE = 0) (
    input clk,
    input [ABITS-1:0] w0_addr, input [8*BYTES-1:0] w0_data, input [BYTES-1:0] w0_en,
    input [ABITS-1:0] w1_addr, input [8*BYTES-1:0] w1_data, input w1_en,
    input [ABITS-1:0] r0_addr, input r0_en, output reg [8*BYTES-1:0] r0_data,
    input [ABITS-1:0] r1_addr, output reg [8*BYTES-1:0] r1_data);
  import "DPI-C" function int unsigned ace_ram_read32(input int node, input int unsigned index);
  import "DPI-C" function void ace_ram_write32(input int node, input int unsigned index,
                                               input int unsigned data, input int unsigned strobe);
  localparam LANES = BYTES / 4;
  integer i;
  always @(posedge clk) begin
    r1_data <= 0;
    if (r0_en)
      for (i = 0; i < LANES; i = i + 1)
        r0_data[32*i +: 32] <= ace_ram_read32(NODE, 32'(r0_addr) * LANES + i);
    for (i = 0; i < LANES; i = i + 1)
      if (|w0_en[4*i +: 4])
        ace_ram_write32(NODE, 32'(w0_addr) * LANES + i, w0_data[32*i +: 32],
                        32'(w0_en[4*i +: 4]));
    if (w1_en)
      for (i = 0; i < LANES; i = i + 1)
        ace_ram_write32(NODE, 32'(w1_addr) * LANES + i, w1_data[32*i +: 32], 32'hf);
  end
endmodule
"""


class SimRam(wiring.Component):
    """``words`` words of ``data_bytes`` bytes (see the module docstring).

    Parameters
    ----------
    storage : "amaranth", "verilog" or "dpi" (``data_bytes`` a multiple of 4)
    node : the driver's memory index (``dpi`` only)
    """

    def __init__(self, words: int, data_bytes: int, *, storage: str = "amaranth",
                 node: int = 0):
        if storage not in ("amaranth", "verilog", "dpi"):
            raise ValueError(f"storage: {storage!r}; allowed: amaranth, verilog, dpi")
        if storage == "dpi" and data_bytes % 4:
            raise ValueError(f"data_bytes: {data_bytes}; the dpi storage needs a multiple of 4")
        self.words, self.data_bytes, self.storage = words, data_bytes, storage
        self.node = node
        w = 8 * data_bytes
        addr = range(words)
        super().__init__({
            "w0_addr": In(addr), "w0_data": In(w), "w0_en": In(data_bytes),
            "w1_addr": In(addr), "w1_data": In(w), "w1_en": In(1),
            "r0_addr": In(addr), "r0_en": In(1), "r0_data": Out(w),
            "r1_addr": In(addr), "r1_data": Out(w),
        })

    def elaborate(self, platform):
        m = Module()
        if self.storage != "amaranth":
            ports = {f"{'o' if name.endswith('_data') and name[0] == 'r' else 'i'}_{name}":
                     getattr(self, name) for name in self.signature.members}
            params = dict(p_WORDS=self.words, p_BYTES=self.data_bytes, p_ABITS=len(self.w0_addr))
            if self.storage == "dpi":
                m.submodules.ram = Instance(SIM_RAM_DPI_MODULE, p_NODE=self.node, **params,
                                            i_clk=ClockSignal(), **ports)
            else:
                m.submodules.ram = Instance(SIM_RAM_MODULE, **params, i_clk=ClockSignal(),
                                            **ports)
            return m
        m.submodules.array = array = Memory(shape=8 * self.data_bytes, depth=self.words,
                                            init=[])
        w0 = array.write_port(granularity=8)
        r0 = array.read_port()
        w1 = array.write_port()
        r1 = array.read_port()
        m.d.comb += [
            w0.addr.eq(self.w0_addr), w0.data.eq(self.w0_data), w0.en.eq(self.w0_en),
            w1.addr.eq(self.w1_addr), w1.data.eq(self.w1_data), w1.en.eq(self.w1_en),
            r0.addr.eq(self.r0_addr), r0.en.eq(self.r0_en), self.r0_data.eq(r0.data),
            r1.addr.eq(self.r1_addr), self.r1_data.eq(r1.data),
        ]
        return m
