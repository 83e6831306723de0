"""cocotb tests of the NIC interface.

On top ``ace_nic`` (one NIC):
- ``test_loopback``: each link's ``tx`` is received by a cocotbext-axi ``AxiStreamSink``, checked
  frame by frame (header, CRC, payload, credit returns) and sent back into ``rx`` by an
  ``AxiStreamSource``; an ``AxiStreamMonitor`` watches ``rx``. Byte-exact scoreboard per channel,
  counters compared with the bytes and beats moved.
- ``test_malformed``: a Python link partner (with its own credit accounting) injects good packets
  and malformed ones (bad magic, bad CRC, bad type, unknown channel, bad length, early tlast, frame
  longer than its length, overflow, credit overflow, garbage); each is counted with its cause and
  dropped, and the good traffic around it arrives intact.

On top ``ace_nic_pair`` (two NICs back to back, link latency in registers):
- ``test_pair_stalled_channel``: every channel sends both ways, channels interleaved on both links;
  one receiving channel is stalled for a long time. The other channels must finish while it is
  stalled, then it drains and finishes too; counters on both sides match.

Every test runs three ways (``mode``): ``none`` (no pauses), ``idle`` (idle cycles on sources),
``backpressure`` (sinks not always ready). ``ACE_SEED`` overrides the seed; seeds are logged.
``test_benchmark`` (only with ``ACE_NIC_BENCH=1``) measures payload throughput on the pair top.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiStreamBus, AxiStreamFrame, AxiStreamMonitor, AxiStreamSink,
                           AxiStreamSource)

from ace.config import AceConfig
from ace.layouts import (NicError, NicRxBeat, NicSendCmd, PacketHeader, PacketType,
                         make_packet_header, packet_header_check)
from ace.hw.nic.interface import LINK_COUNTERS
from ace.hw.nic.rx import RX_CHECK_STAGES
from testbench.inputs import zero_inputs

CONFIG = AceConfig(**json.loads(os.environ["ACE_CONFIG"]))
TOP = os.environ.get("ACE_TOP", "ace_nic")
BENCH = os.environ.get("ACE_NIC_BENCH", "0") == "1"
LB = CONFIG.link_bytes
DEPTH = CONFIG.rx_channel_beats
MAX_SEND = min(CONFIG.max_packet_bytes, DEPTH * LB)
MODES = ["none", "idle", "backpressure"]
HEADER_MASK = (1 << 64) - 1


def seed_for(name: str, mode: str) -> int:
    base = int(os.environ.get("ACE_SEED", "1234"))
    return base * 1000 + sum(map(ord, name + mode))


def pause_pattern(mode: str, role: str, rng: random.Random):
    """Pause generator (True = pause) for a source or sink in a mode."""
    if mode == "idle" and role == "source":
        return itertools.cycle([rng.random() < 0.3 for _ in range(97)])
    if mode == "backpressure" and role == "sink":
        return itertools.cycle([0, 0, 0, 1] + [rng.random() < 0.3 for _ in range(61)])
    return None


# -- lib.stream drivers for the channel ports ----------------------------------------------------

class Channel:
    """One channel's stream ports on the DUT (``<prefix>ch<c>_...``), driven from one loop."""

    def __init__(self, dut, prefix: str, c: int):
        def h(name):
            return getattr(dut, f"{prefix}ch{c}_{name}")
        self.c = c
        self.send = (h("send__payload"), h("send__valid"), h("send__ready"))
        self.data = (h("send_data__payload"), h("send_data__valid"), h("send_data__ready"))
        self.recv = (h("recv__payload"), h("recv__valid"), h("recv__ready"))
        self.recv_link = h("recv_link")
        self.cmd_q: deque[int] = deque()
        self.data_q: deque[int] = deque()
        self.received: list = []        # NicRxBeat consts
        self.bytes_in = 0                # payload bytes received (keep bits)
        self.recv_blocked_until = 0      # cycle before which recv.ready stays low
        self.beats_out = 0


class ChannelDriver:
    """Drives every channel of one NIC in a single per-cycle coroutine (fewer wake-ups)."""

    def __init__(self, dut, prefix: str, clock, mode: str, rng: random.Random):
        self.dut = dut
        self.clock = clock
        self.channels = [Channel(dut, prefix, c) for c in range(CONFIG.num_channels)]
        self.src_pause = pause_pattern(mode, "source", rng) or itertools.repeat(False)
        self.sink_pause = pause_pattern(mode, "sink", rng) or itertools.repeat(False)
        self.cycle = 0
        self.rx_layout = NicRxBeat(CONFIG)
        for ch in self.channels:
            for port in (ch.send, ch.data):
                port[1].value = 0
            ch.recv[2].value = 0

    def start(self):
        return cocotb.start_soon(self._run())

    def _drive_source(self, port, queue, pause):
        payload, valid, ready = port
        if valid.value and ready.value:
            queue.popleft()
            offered = False
        else:
            offered = bool(valid.value)
        if offered:
            return True                 # must hold an offered item until taken
        if queue and not pause:
            payload.value = queue[0]
            valid.value = 1
            return True
        valid.value = 0
        return False

    async def _run(self):
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1
            src_pause = next(self.src_pause)
            sink_pause = next(self.sink_pause)
            for ch in self.channels:
                self._drive_source(ch.send, ch.cmd_q, src_pause)
                before = len(ch.data_q)
                self._drive_source(ch.data, ch.data_q, src_pause)
                ch.beats_out += before - len(ch.data_q)
                payload, valid, ready = ch.recv
                if valid.value and ready.value:
                    beat = self.rx_layout.from_bits(int(payload.value))
                    ch.received.append(beat)
                    ch.bytes_in += bin(int(beat.keep)).count("1")
                ready.value = int(not sink_pause and self.cycle >= ch.recv_blocked_until)

    def send(self, c: int, link: int, tag: int, data: bytes):
        ch = self.channels[c]
        ch.cmd_q.append(NicSendCmd(CONFIG).const(
            {"link": link, "tag": tag, "length": len(data)}).as_value().value)
        for i in range(0, len(data), LB):
            ch.data_q.append(int.from_bytes(data[i:i + LB].ljust(LB, b"\0"), "little"))


def packets_from_beats(beats):
    """[(src, tag, bytes)] reassembled from NicRxBeat consts, checking first/last/keep."""
    out, cur, expect_first = [], b"", True
    for beat in beats:
        assert bool(beat.first) == expect_first, "first flag out of place"
        keep = int(beat.keep)
        nbytes = bin(keep).count("1")
        assert keep == (1 << nbytes) - 1, f"keep not contiguous: {keep:#x}"
        cur += int(beat.data).to_bytes(LB, "little")[:nbytes]
        expect_first = bool(beat.last)
        if beat.last:
            assert len(cur) == int(beat.length), "delivered bytes differ from header length"
            out.append((int(beat.src), int(beat.tag), cur))
            cur = b""
    return out


# -- testbench ------------------------------------------------------------------------------------

class NicTB:
    """Clock, reset and per-cycle bookkeeping for either top."""

    def __init__(self, dut, mode: str, name: str):
        self.dut = dut
        zero_inputs(dut)
        self.mode = mode
        self.seed = seed_for(name, mode)
        self.rng = random.Random(self.seed)
        dut._log.info(f"{name}: mode={mode} seed={self.seed} (ACE_SEED to override)")
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def wait_until(self, condition, limit: int, what: str):
        for _ in range(limit):
            if condition():
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"timeout after {limit} cycles waiting for {what}")

    def counter(self, prefix: str, link: int, name: str) -> int:
        return int(getattr(self.dut, f"{prefix}link{link}_{name}").value)


def random_length(rng: random.Random) -> int:
    pick = rng.random()
    if pick < 0.15:
        return rng.randint(1, LB)
    if pick < 0.25:
        return MAX_SEND
    return rng.randint(1, MAX_SEND)


class LinkWatch:
    """Per-cycle count of tx stall cycles (tvalid & ~tready) on one link."""

    def __init__(self, dut, prefix, link):
        self.valid = getattr(dut, f"{prefix}tx{link}__tvalid")
        self.ready = getattr(dut, f"{prefix}tx{link}__tready")
        self.stalls = 0
        self.beats = 0

    async def run(self, clock):
        while True:
            await RisingEdge(clock)
            if self.valid.value:
                if self.ready.value:
                    self.beats += 1
                else:
                    self.stalls += 1


# -- (a) one NIC, links looped through cocotbext-axi ----------------------------------------------

@cocotb.test(skip=TOP != "ace_nic" or BENCH)
@cocotb.parametrize(mode=MODES)
async def test_loopback(dut, mode):
    tb = NicTB(dut, mode, "loopback")
    await tb.reset()
    node = 0x5A
    dut.node_id.value = node
    drv = ChannelDriver(dut, "", dut.clk, mode, tb.rng)
    drv.start()
    nlinks, nch = CONFIG.num_links, CONFIG.num_channels
    sinks, sources, monitors, watches = [], [], [], []
    for l in range(nlinks):
        sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"tx{l}_"), dut.clk, dut.rst)
        source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"rx{l}_"), dut.clk, dut.rst)
        monitor = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, f"rx{l}_"), dut.clk, dut.rst)
        if (gen := pause_pattern(mode, "sink", tb.rng)) is not None:
            sink.set_pause_generator(gen)
        if (gen := pause_pattern(mode, "source", tb.rng)) is not None:
            source.set_pause_generator(gen)
        watch = LinkWatch(dut, "", l)
        cocotb.start_soon(watch.run(dut.clk))
        sinks.append(sink)
        sources.append(source)
        monitors.append(monitor)
        watches.append(watch)

    expected = {(l, c): deque() for l in range(nlinks) for c in range(nch)}
    credited = {(l, c): 0 for l in range(nlinks) for c in range(nch)}
    frames_seen = [0] * nlinks
    beats_seen = [0] * nlinks

    async def forward(l):
        while True:
            frame = await sinks[l].recv()
            data = bytes(frame.tdata)
            frames_seen[l] += 1
            beats_seen[l] += 1 + -(-(len(data) - LB) // LB)
            bits = int.from_bytes(data[:8], "little")
            hdr = PacketHeader.from_bits(bits)
            assert hdr.magic == 0xA and hdr.check == packet_header_check(bits), f"bad {bits:#x}"
            assert hdr.src == node
            assert not any(data[8:LB]), "header beat padding not zero"
            if hdr.ptype == PacketType.CREDIT:
                assert len(data) == LB
                credited[(l, hdr.channel)] += hdr.length
            else:
                want_tag, want = expected[(l, hdr.channel)].popleft()
                assert (hdr.tag, hdr.length) == (want_tag, len(want))
                assert data[LB:] == want, f"link {l} channel {hdr.channel}: payload differs"
            await sources[l].send(AxiStreamFrame(data))

    for l in range(nlinks):
        cocotb.start_soon(forward(l))

    sent = {c: [] for c in range(nch)}
    link_bytes = [0] * nlinks
    link_beats = {(l, c): 0 for l in range(nlinks) for c in range(nch)}
    for phase, link in enumerate(range(nlinks)):
        for ch in drv.channels:
            ch.recv_link.value = link
        for c in range(nch):
            for i in range(8):
                data = tb.rng.randbytes(random_length(tb.rng))
                tag = (phase * 16 + i) & 0xFF
                expected[(link, c)].append((tag, data))
                sent[c].append((tag, data))
                link_bytes[link] += len(data)
                link_beats[(link, c)] += -(-len(data) // LB)
                drv.send(c, link, tag, data)
        total = {c: sum(len(d) for _, d in sent[c]) for c in range(nch)}
        await tb.wait_until(lambda: all(ch.bytes_in == total[ch.c] for ch in drv.channels),
                            60000, f"phase {phase} delivery")
    await ClockCycles(dut.clk, 300)      # let the last credit returns go round

    for c, ch in enumerate(drv.channels):
        got = packets_from_beats(ch.received)
        assert [(src, tag, d) for src, tag, d in got] == [(node, t, d) for t, d in sent[c]], \
            f"channel {c}: delivered packets differ"
    for l in range(nlinks):
        assert not any(expected[(l, c)] for c in range(nch)), "packets missing on the link"
        for c in range(nch):
            assert credited[(l, c)] == link_beats[(l, c)], \
                f"link {l} channel {c}: {credited[(l, c)]} credits returned for " \
                f"{link_beats[(l, c)]} beats"
        assert tb.counter("", l, "tx_payload_bytes") == link_bytes[l]
        assert tb.counter("", l, "rx_payload_bytes") == link_bytes[l]
        assert tb.counter("", l, "tx_header_bytes") == frames_seen[l] * LB
        assert tb.counter("", l, "rx_header_bytes") == frames_seen[l] * LB
        assert tb.counter("", l, "tx_busy_cycles") == beats_seen[l] == watches[l].beats
        assert tb.counter("", l, "rx_busy_cycles") == beats_seen[l]
        assert tb.counter("", l, "tx_stall_cycles") == watches[l].stalls
        assert tb.counter("", l, "rx_errors") == 0
        monitored = 0
        while not monitors[l].empty():
            monitored += len(monitors[l].recv_nowait().tdata)
        assert monitored == link_bytes[l] + frames_seen[l] * LB
    dut._log.info(f"loopback {mode}: {sum(link_bytes)} payload bytes, frames {frames_seen}, "
                  f"tx stall cycles {[w.stalls for w in watches]}")


# -- (b) malformed packets on rx ------------------------------------------------------------------

@cocotb.test(skip=TOP != "ace_nic" or BENCH)
@cocotb.parametrize(mode=MODES)
async def test_malformed(dut, mode):
    tb = NicTB(dut, mode, "malformed")
    await tb.reset()
    dut.node_id.value = 3
    drv = ChannelDriver(dut, "", dut.clk, mode, tb.rng)
    drv.start()
    link = 0
    for ch in drv.channels:
        ch.recv_link.value = link
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"rx{link}_"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"tx{link}_"), dut.clk, dut.rst)
    if (gen := pause_pattern(mode, "source", tb.rng)) is not None:
        source.set_pause_generator(gen)
    if (gen := pause_pattern(mode, "sink", tb.rng)) is not None:
        sink.set_pause_generator(gen)
    nch = CONFIG.num_channels
    peer_credits = [DEPTH] * nch     # the Python link partner's credits towards the DUT

    async def credit_intake():
        while True:
            frame = await sink.recv()
            hdr = PacketHeader.from_bits(int.from_bytes(bytes(frame.tdata[:8]), "little"))
            assert hdr.ptype == PacketType.CREDIT, "the DUT sent data nobody asked for"
            peer_credits[hdr.channel] += hdr.length
            assert peer_credits[hdr.channel] <= DEPTH
    cocotb.start_soon(credit_intake())

    rng = tb.rng
    good = {c: [] for c in range(nch)}

    def frame(header: int, payload: bytes) -> AxiStreamFrame:
        return AxiStreamFrame(header.to_bytes(LB, "little") + payload)

    async def send_good(c):
        data = rng.randbytes(rng.randint(1, MAX_SEND // 2))
        beats = -(-len(data) // LB)
        await tb.wait_until(lambda: peer_credits[c] >= beats, 20000, "credits")
        peer_credits[c] -= beats
        tag = len(good[c]) & 0xFF
        good[c].append((tag, data))
        await source.send(frame(make_packet_header(src=7, channel=c, tag=tag,
                                                   length=len(data)), data))

    def data_hdr(**kw):
        fields = {"ptype": PacketType.DATA, "src": 7, "channel": 0, "tag": 0, "length": 20}
        fields.update(kw)
        return make_packet_header(**fields)

    bad = [
        (frame(data_hdr(magic=5), rng.randbytes(20)), NicError.BAD_MAGIC),
        (frame(data_hdr(version=1), rng.randbytes(20)), NicError.BAD_MAGIC),
        (frame(data_hdr(check=packet_header_check(data_hdr()) ^ 0x10), rng.randbytes(20)),
         NicError.BAD_CHECK),
        (frame(data_hdr() ^ (1 << 40), rng.randbytes(20)), NicError.BAD_CHECK),
        (frame(data_hdr(ptype=2), rng.randbytes(20)), NicError.BAD_TYPE),
        (frame(data_hdr(channel=nch), rng.randbytes(20)), NicError.BAD_CHANNEL),
        (frame(data_hdr(length=0), rng.randbytes(20)), NicError.BAD_LENGTH),
        (frame(data_hdr(length=CONFIG.max_packet_bytes + LB), rng.randbytes(20)),
         NicError.BAD_LENGTH),
        (frame(data_hdr(length=3 * LB), rng.randbytes(LB)), NicError.EARLY_TLAST),
        (frame(data_hdr(length=LB), b""), NicError.EARLY_TLAST),
        (frame(data_hdr(length=LB), rng.randbytes(3 * LB)), NicError.MISSING_TLAST),
        (frame(data_hdr(length=(DEPTH + 1) * LB), bytes((DEPTH + 1) * LB)), NicError.OVERFLOW),
        (frame(make_packet_header(ptype=PacketType.CREDIT, channel=0, length=1), b""),
         NicError.CREDIT_OVERFLOW),
        (frame(make_packet_header(ptype=PacketType.CREDIT, channel=0, length=1), b"xx"),
         NicError.MISSING_TLAST),
        (AxiStreamFrame(bytes([0x0F]) + rng.randbytes(3 * LB - 1)), None),   # garbage
    ]
    causes = []
    for i, (bad_frame, cause) in enumerate(bad):
        await send_good(i % nch)
        errors_before = tb.counter("", link, "rx_errors")
        await source.send(bad_frame)
        await source.wait()
        # The error is counted when the FSM, RX_CHECK_STAGES behind the link, sees the beat.
        await ClockCycles(dut.clk, RX_CHECK_STAGES + 3)
        assert tb.counter("", link, "rx_errors") == errors_before + 1, f"bad frame {i} not counted"
        assert int(dut.link0_rx_error.value) == 1
        got = NicError(int(dut.link0_rx_error_cause.value))
        if cause is not None:
            assert got == cause, f"bad frame {i}: cause {got!r}, expected {cause!r}"
        causes.append(got)
        dut.error_clear.value = 1
        await RisingEdge(dut.clk)
        dut.error_clear.value = 0
        await RisingEdge(dut.clk)
        assert int(dut.link0_rx_error.value) == 0
    for i in range(2 * nch):
        await send_good(i % nch)
    await tb.wait_until(
        lambda: all(ch.bytes_in == sum(len(d) for _, d in good[ch.c]) for ch in drv.channels),
        40000, "good packets")
    for ch in drv.channels:
        assert packets_from_beats(ch.received) == [(7, t, d) for t, d in good[ch.c]]
    total = sum(len(d) for c in good for _, d in good[c])
    assert tb.counter("", link, "rx_payload_bytes") == total
    assert tb.counter("", link, "rx_errors") == len(bad)
    dut._log.info(f"malformed {mode}: {len(bad)} bad frames dropped ({[c.name for c in causes]}),"
                  f" {sum(len(v) for v in good.values())} good packets, {total} bytes")


# -- (c) two NICs back to back, one channel stalled -----------------------------------------------

@cocotb.test(skip=TOP != "ace_nic_pair" or BENCH)
@cocotb.parametrize(mode=MODES)
async def test_pair_stalled_channel(dut, mode):
    tb = NicTB(dut, mode, "pair")
    await tb.reset()
    dut.a_node_id.value = 1
    dut.b_node_id.value = 2
    drivers = {"a": ChannelDriver(dut, "a_", dut.clk, mode, tb.rng),
               "b": ChannelDriver(dut, "b_", dut.clk, mode, tb.rng)}
    for drv in drivers.values():
        drv.start()
    nlinks, nch = CONFIG.num_links, CONFIG.num_channels
    stall_cycles = 4000
    stalled = ("b", 0)                   # B's channel 0 receiver is not ready for a long time
    drivers["b"].channels[0].recv_blocked_until = stall_cycles
    sent = {(side, c): [] for side in "ab" for c in range(nch)}
    link_bytes = {(side, l): 0 for side in "ab" for l in range(nlinks)}
    for side, drv in drivers.items():
        for c in range(nch):
            link = c % nlinks
            drv.channels[c].recv_link.value = link
            for i in range(6):
                data = tb.rng.randbytes(random_length(tb.rng))
                sent[(side, c)].append((i, data))
                link_bytes[(side, link)] += len(data)
                drv.send(c, link, i, data)

    want = {(r, c): sum(len(d) for _, d in sent[("a" if r == "b" else "b", c)])
            for r in "ab" for c in range(nch)}
    finish = {}

    async def watch_done():
        cycles = 0
        while len(finish) < len(want):
            for (r, c), total in want.items():
                if (r, c) not in finish and drivers[r].channels[c].bytes_in == total:
                    finish[(r, c)] = cycles
            await RisingEdge(dut.clk)
            cycles += 1

    cocotb.start_soon(watch_done())
    await tb.wait_until(lambda: len(finish) == len(want), stall_cycles * 4, "all channels")
    for key, cycles in finish.items():
        if key == stalled:
            assert cycles >= stall_cycles
        else:
            assert cycles < stall_cycles, f"{key} finished after {cycles} cycles: blocked"
    stalled_ch = drivers["b"].channels[0]
    assert stalled_ch.received, "the stalled channel never drained"
    await ClockCycles(dut.clk, 300)
    for receiver in "ab":
        other = "a" if receiver == "b" else "b"
        node = {"a": 1, "b": 2}[other]
        for c in range(nch):
            got = packets_from_beats(drivers[receiver].channels[c].received)
            assert got == [(node, t, d) for t, d in sent[(other, c)]], \
                f"{receiver} channel {c}: data differs"
    for side in "ab":
        other = "a" if side == "b" else "b"
        for l in range(nlinks):
            moved = link_bytes[(side, l)]
            assert tb.counter(f"{side}_", l, "tx_payload_bytes") == moved
            assert tb.counter(f"{other}_", l, "rx_payload_bytes") == moved
            assert (tb.counter(f"{side}_", l, "tx_header_bytes")
                    == tb.counter(f"{other}_", l, "rx_header_bytes"))
            assert (tb.counter(f"{side}_", l, "tx_busy_cycles")
                    == tb.counter(f"{other}_", l, "rx_busy_cycles"))
            assert tb.counter(f"{other}_", l, "rx_errors") == 0
            assert tb.counter(f"{side}_", l, "tx_stall_cycles") == 0
    dut._log.info(f"pair {mode}: finish cycles {dict(sorted(finish.items()))}")


# -- benchmark ------------------------------------------------------------------------------------

@cocotb.test(skip=TOP != "ace_nic_pair" or not BENCH)
@cocotb.parametrize(bidirectional=[False, True])
async def test_benchmark(dut, bidirectional):
    tb = NicTB(dut, "none", "benchmark")
    await tb.reset()
    drivers = {"a": ChannelDriver(dut, "a_", dut.clk, "none", tb.rng),
               "b": ChannelDriver(dut, "b_", dut.clk, "none", tb.rng)}
    for drv in drivers.values():
        drv.start()
        for ch in drv.channels:
            ch.recv_link.value = 0
    packet = int(os.environ.get("ACE_NIC_BENCH_BYTES", "1024"))
    count = 48 * 1024 // packet
    for side in ("a", "b") if bidirectional else ("a",):
        for c in range(CONFIG.num_channels):
            for i in range(count):
                drivers[side].send(c, 0, i, bytes([i & 0xFF]) * packet)
    warm, window = 300, 3000
    await ClockCycles(dut.clk, warm)
    # RX bytes count at packet commit, so RX throughput is measured between the first and the
    # last commit inside the window (whole packets), TX over the window (per beat).
    commits = []

    async def watch_commits():
        cycle, last = 0, tb.counter("b_", 0, "rx_payload_bytes")
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            value = tb.counter("b_", 0, "rx_payload_bytes")
            if value != last:
                commits.append((cycle, value))
                last = value
    watcher = cocotb.start_soon(watch_commits())
    snap0 = {(p, n): tb.counter(p, 0, n) for p in ("a_", "b_") for n in LINK_COUNTERS}
    await ClockCycles(dut.clk, window)
    snap1 = {(p, n): tb.counter(p, 0, n) for p in ("a_", "b_") for n in LINK_COUNTERS}
    watcher.cancel()
    delta = {k: snap1[k] - snap0[k] for k in snap0}
    tx_util = delta[("a_", "tx_payload_bytes")] / (window * LB)
    (c0, v0), (c1, v1) = commits[0], commits[-1]
    rx_util = (v1 - v0) / ((c1 - c0) * LB)
    hdr = delta[("a_", "tx_header_bytes")] / (window * LB)
    line = (f"NIC benchmark ({'both directions' if bidirectional else 'A->B'}), "
            f"{packet}-byte packets, {CONFIG.num_channels} channels on link 0, "
            f"link {LB} B/cycle: TX payload {tx_util:.2%} of link bytes/cycle, "
            f"RX payload {rx_util:.2%}, header beats {hdr:.2%} (A tx), "
            f"A tx credit+data headers {delta[('a_', 'tx_header_bytes')] // LB}, "
            f"B tx headers {delta[('b_', 'tx_header_bytes')] // LB} in {window} cycles")
    dut._log.info(line)
    print(line, flush=True)
    results = os.environ.get("ACE_NIC_BENCH_OUT")
    if results:
        with open(results, "a") as out:
            out.write(json.dumps({"bidirectional": bidirectional, "packet_bytes": packet,
                                  "tx_payload_util": tx_util, "rx_payload_util": rx_util,
                                  "tx_header_util": hdr, "window_cycles": window}) + "\n")
    assert tx_util >= 0.95 and rx_util >= 0.95, line
