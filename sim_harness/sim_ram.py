"""The storage array of the memory model: Amaranth ``Memory`` or a behavioural Verilog RAM.

Amaranth writes every word of a ``Memory``'s initial contents into the Verilog it emits, so a
1 MiB array becomes megabytes of ``initial`` statements that Verilator must then compile. For
system builds the array is therefore a small hand-written Verilog module
(:data:`SIM_RAM_VERILOG`, instantiated through ``Instance``) with the same ports and timing;
the Amaranth simulator, which cannot run Verilog, uses the ``Memory`` form.

Ports: write port 0 with a byte mask, write port 1 for whole words, read port 0 with an enable
(the output holds while it is low) and read port 1 always enabled. Reads are synchronous (one
cycle) and return the old word when the same cycle writes it.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["SimRam", "SIM_RAM_MODULE", "SIM_RAM_VERILOG"]

SIM_RAM_MODULE = "ace_sim_ram"

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


class SimRam(wiring.Component):
    """``words`` words of ``data_bytes`` bytes (see the module docstring).

    Parameters
    ----------
    storage : "amaranth" or "verilog"
    """

    def __init__(self, words: int, data_bytes: int, *, storage: str = "amaranth"):
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"storage: {storage!r}; allowed: amaranth, verilog")
        self.words, self.data_bytes, self.storage = words, data_bytes, storage
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
        if self.storage == "verilog":
            ports = {f"{'o' if name.endswith('_data') and name[0] == 'r' else 'i'}_{name}":
                     getattr(self, name) for name in self.signature.members}
            m.submodules.ram = Instance(
                SIM_RAM_MODULE, p_WORDS=self.words, p_BYTES=self.data_bytes,
                p_ABITS=len(self.w0_addr), i_clk=ClockSignal(), **ports)
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
