"""Python model of ACE's SRAM ports for cocotb testbenches: a reusable verification component.

:class:`SramModel` serves a write port (``sram_write_signature``: one stream of ``{addr, data,
mask}``) and/or a read port (``sram_read_signature``: ``req`` addresses in, ``resp`` data out, in
request order) of a DUT that is the requester. It holds the memory as a ``bytearray`` (word
``a`` is bytes ``a*B .. a*B + B - 1``), drives ``ready`` with optional random backpressure and
answers each read after a random latency, in order, optionally with idle cycles on ``resp``.

Ports are found by name: a port ``sram_w`` is ``sram_w__payload/valid/ready``; a read port
``sram_r`` is ``sram_r__req__payload/valid/ready`` and ``sram_r__resp__payload/valid/ready``.
Handshakes are sampled right after the rising clock edge, like cocotbext-axi's streams.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import RisingEdge

__all__ = ["SramModel"]


def _field(layout, name):
    for field_name, field in layout:
        if field_name == name:
            return field.offset, field.width
    raise KeyError(name)


class SramModel:
    """Memory behind a DUT's SRAM write and/or read port.

    Parameters
    ----------
    dut : cocotb handle
    clock : cocotb handle
    words, word_bytes : int
        Size of the memory and of a word.
    write_port, read_port : str or None
        Port names on the DUT (``None`` leaves that port out).
    rng : random.Random
        Source of backpressure and latency decisions (seeded by the test).
    write_stall, req_stall : float
        Probability that ``ready`` is low in a cycle on the write port / read request port.
    resp_idle : float
        Probability of an idle cycle before a response word is offered.
    latency : (int, int)
        Range of read latency in cycles from request to response (at least 1).
    max_pending : int
        Read requests held before ``req.ready`` drops.
    """

    def __init__(self, dut, clock, words: int, word_bytes: int, *, write_port="sram_w",
                 read_port="sram_r", rng=None, write_stall=0.0, req_stall=0.0, resp_idle=0.0,
                 latency=(1, 1), max_pending=16):
        from ace.layouts import SramWrite
        self.dut = dut
        self.clock = clock
        self.words = words
        self.word_bytes = word_bytes
        self.mem = bytearray(words * word_bytes)
        self.rng = rng or random.Random(0)
        self.write_stall = write_stall
        self.req_stall = req_stall
        self.resp_idle = resp_idle
        self.latency = latency
        self.max_pending = max_pending
        self.writes = 0          # write handshakes
        self.reads = 0           # read requests
        self._tasks = []
        self._layout = SramWrite(words, word_bytes)
        if write_port:
            self.w_payload = getattr(dut, f"{write_port}__payload")
            self.w_valid = getattr(dut, f"{write_port}__valid")
            self.w_ready = getattr(dut, f"{write_port}__ready")
            self.w_ready.value = 0
            self._tasks.append(cocotb.start_soon(self._run_write()))
        if read_port:
            self.req_payload = getattr(dut, f"{read_port}__req__payload")
            self.req_valid = getattr(dut, f"{read_port}__req__valid")
            self.req_ready = getattr(dut, f"{read_port}__req__ready")
            self.resp_payload = getattr(dut, f"{read_port}__resp__payload")
            self.resp_valid = getattr(dut, f"{read_port}__resp__valid")
            self.resp_ready = getattr(dut, f"{read_port}__resp__ready")
            self.req_ready.value = 0
            self.resp_valid.value = 0
            self._pending = []   # (cycle the response may go out, data)
            self._tasks.append(cocotb.start_soon(self._run_read()))

    # -- memory access for the testbench --------------------------------------------------------

    def read_bytes(self, word_addr: int, length: int) -> bytes:
        start = word_addr * self.word_bytes
        return bytes(self.mem[start:start + length])

    def write_bytes(self, word_addr: int, data: bytes):
        start = word_addr * self.word_bytes
        self.mem[start:start + len(data)] = data

    def stop(self):
        for task in self._tasks:
            task.cancel()

    # -- port processes ------------------------------------------------------------------------

    async def _run_write(self):
        a_off, a_w = _field(self._layout, "addr")
        d_off, d_w = _field(self._layout, "data")
        m_off, m_w = _field(self._layout, "mask")
        B = self.word_bytes
        while True:
            await RisingEdge(self.clock)
            if int(self.w_valid.value) and int(self.w_ready.value):
                raw = int(self.w_payload.value)
                addr = (raw >> a_off) & ((1 << a_w) - 1)
                data = ((raw >> d_off) & ((1 << d_w) - 1)).to_bytes(B, "little")
                mask = (raw >> m_off) & ((1 << m_w) - 1)
                assert addr < self.words, f"SRAM write to word {addr} beyond {self.words}"
                for lane in range(B):
                    if mask >> lane & 1:
                        self.mem[addr * B + lane] = data[lane]
                self.writes += 1
            self.w_ready.value = int(self.rng.random() >= self.write_stall)

    async def _run_read(self):
        B = self.word_bytes
        cycle = 0
        last_due = 0
        offered = False
        while True:
            await RisingEdge(self.clock)
            cycle += 1
            if offered and int(self.resp_ready.value):
                self._pending.pop(0)
                offered = False
            if int(self.req_valid.value) and int(self.req_ready.value):
                addr = int(self.req_payload.value)
                assert addr < self.words, f"SRAM read of word {addr} beyond {self.words}"
                due = max(last_due, cycle + self.rng.randint(*self.latency) - 1)
                last_due = due
                self._pending.append((due, self.read_bytes(addr, B)))
                self.reads += 1
            self.req_ready.value = int(len(self._pending) < self.max_pending
                                       and self.rng.random() >= self.req_stall)
            if not offered and self._pending and self._pending[0][0] <= cycle \
                    and self.rng.random() >= self.resp_idle:
                self.resp_payload.value = int.from_bytes(self._pending[0][1], "little")
                offered = True
            self.resp_valid.value = int(offered)
