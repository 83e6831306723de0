"""Amaranth-simulator unit tests of the NIC: header check, TX link, RX link, RX buffer, and a
NicInterface with its link looped back."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.layouts import (NicError, PacketHeader, PacketType, make_packet_header,
                         packet_header_check)
from ace.hw.nic.interface import NicInterface
from ace.hw.nic.header import HeaderCheck
from ace.hw.nic.rx import NicLinkRx
from ace.hw.nic.rx_buffer import NicRxBuffer
from ace.hw.nic.tx import NicLinkTx, credit_threshold

CFG = NAMED_CONFIGS["small"]
LB = CFG.link_bytes
DEPTH = CFG.rx_channel_beats


def run(dut, *testbenches, background=(), deadline=20000):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for bench in testbenches:
        sim.add_testbench(bench)
    for bench in background:
        sim.add_testbench(bench, background=True)

    async def watchdog(ctx):
        for _ in range(deadline):
            await ctx.tick()
        raise AssertionError(f"watchdog: no completion in {deadline} cycles")
    sim.add_testbench(watchdog, background=True)
    sim.run()


class StateRecorder:
    """Background testbench recording which FSM states were visited."""

    def __init__(self, component):
        self.component = component
        self.seen = set()

    async def run(self, ctx):
        while True:
            for name, expr in self.component.fsm_states.items():
                if ctx.get(expr):
                    self.seen.add(name)
            await ctx.tick()

    def check(self):
        assert self.seen == set(self.component.fsm_states), \
            f"FSM states not visited: {set(self.component.fsm_states) - self.seen}"


def beats_of(payload: bytes):
    return [int.from_bytes(payload[i:i + LB].ljust(LB, b"\0"), "little")
            for i in range(0, len(payload), LB)]


def frame_beats(header: int, payload: bytes):
    """(tdata, tlast) beats of a packet."""
    beats = [header] + beats_of(payload)
    return [(beat, int(i == len(beats) - 1)) for i, beat in enumerate(beats)]


# -- header check -------------------------------------------------------------------------------

def test_header_pack_unpack_roundtrip():
    bits = make_packet_header(ptype=PacketType.DATA, src=7, channel=3, tag=200, length=1000)
    view = PacketHeader.from_bits(bits)
    assert (view.src, view.channel, view.tag, view.length) == (7, 3, 200, 1000)
    assert view.ptype == PacketType.DATA
    assert view.check == packet_header_check(bits)


def test_header_check_matches_python():
    dut = HeaderCheck()
    rng = random.Random(1)
    cases = [rng.getrandbits(64) for _ in range(40)]
    cases += [make_packet_header(src=rng.getrandbits(8), channel=rng.getrandbits(4),
                                 tag=rng.getrandbits(8), length=rng.getrandbits(17))
              for _ in range(40)]

    async def bench(ctx):
        for bits in cases:
            ctx.set(dut.header, PacketHeader.from_bits(bits))
            assert ctx.get(dut.check) == packet_header_check(bits)
            assert ctx.get(dut.ok) == (bits >> 56 == packet_header_check(bits))
            # Any single-bit error in the covered bits is detected.
            flipped = bits ^ (1 << rng.randrange(56))
            ctx.set(dut.header, PacketHeader.from_bits(flipped))
            assert ctx.get(dut.ok) == (flipped >> 56 == packet_header_check(flipped))
            if bits >> 56 == packet_header_check(bits):
                assert not ctx.get(dut.ok)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


# -- TX link ------------------------------------------------------------------------------------

class LinkRecorder:
    """Records every beat taken on an AXI-Stream source port with its cycle number; optional
    backpressure pattern on tready."""

    def __init__(self, port, ready_pattern=None):
        self.port = port
        self.ready_pattern = ready_pattern
        self.beats = []

    async def run(self, ctx):
        cycle = 0
        while True:
            ready = 1 if self.ready_pattern is None else self.ready_pattern[cycle % len(
                self.ready_pattern)]
            ctx.set(self.port.tready, ready)
            _, _, valid, data, keep, last = await ctx.tick().sample(
                self.port.tvalid, self.port.tdata, self.port.tkeep, self.port.tlast)
            if valid and ready:
                self.beats.append((cycle, data, keep, last))
            cycle += 1

    def frames(self):
        frames, cur = [], []
        for beat in self.beats:
            cur.append(beat)
            if beat[3]:
                frames.append(cur)
                cur = []
        return frames


async def stream_put(ctx, port, payload):
    ctx.set(port.payload, payload)
    ctx.set(port.valid, 1)
    await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


def test_tx_packets_line_rate_round_robin():
    """Two channels, back-to-back packets: header + payload, no idle cycle, round robin, credits
    spent; every TX FSM state visited."""
    dut = NicLinkTx(CFG)
    rng = random.Random(2)
    lengths = {0: [40, 16, 7], 1: [33, 1, 64]}
    payloads = {c: [rng.randbytes(n) for n in lengths[c]] for c in lengths}
    rec = LinkRecorder(dut.link)
    states = StateRecorder(dut)

    def channel_bench(c):
        async def cmds(ctx):
            for i, data in enumerate(payloads[c]):
                await stream_put(ctx, getattr(dut, f"cmd{c}"),
                                 {"link": 0, "tag": 10 * c + i, "length": len(data)})

        async def beats(ctx):
            for data in payloads[c]:
                for beat in beats_of(data):
                    await stream_put(ctx, getattr(dut, f"data{c}"), {"data": beat})
        return cmds, beats

    async def finish(ctx):
        ctx.set(dut.node_id, 5)
        await ctx.tick().until(dut.cmd0.valid)
        await ctx.tick().repeat(40)
        for c in range(2):
            used = sum(-(-n // LB) for n in lengths[c])
            assert ctx.get(getattr(dut, f"credits{c}")) == DEPTH - used
        assert ctx.get(dut.payload_bytes) == sum(sum(v) for v in lengths.values())
        assert ctx.get(dut.header_bytes) == 6 * LB

    benches = [b for c in (0, 1) for b in channel_bench(c)]
    run(dut, finish, *benches, background=[rec.run, states.run])
    frames = rec.frames()
    assert len(frames) == 6
    order = []
    for frame in frames:
        hdr = PacketHeader.from_bits(frame[0][1] & ((1 << 64) - 1))
        assert hdr.check == packet_header_check(frame[0][1])
        assert hdr.ptype == PacketType.DATA and hdr.src == 5
        data = payloads[hdr.channel][hdr.tag - 10 * hdr.channel]
        assert hdr.length == len(data)
        got = b"".join(beat[1].to_bytes(LB, "little")[:bin(beat[2]).count("1")]
                       for beat in frame[1:])
        assert got == data
        order.append(hdr.channel)
    assert all(a != b for a, b in zip(order, order[1:])), f"not round robin: {order}"
    cycles = [beat[0] for beat in rec.beats]
    assert cycles == list(range(cycles[0], cycles[0] + len(cycles))), "idle cycle on the link"
    states.check()


def test_tx_credits_gate_and_credit_packets():
    """Owed credits at the threshold go out as a CREDIT packet before waiting data; a channel
    without enough credits waits until credit_in restores them; headers are held under
    backpressure (ready pattern)."""
    dut = NicLinkTx(CFG)
    threshold = credit_threshold(CFG)
    rec = LinkRecorder(dut.link, ready_pattern=[1, 0, 0, 1, 1])
    half = DEPTH // 2

    async def feeder(ctx):
        ctx.set(dut.data0.valid, 1)
        value = 0
        while True:
            ctx.set(dut.data0.payload, {"data": value})
            _, _, ready = await ctx.tick().sample(dut.data0.ready)
            value += ready

    async def bench(ctx):
        await stream_put(ctx, dut.cmd0, {"link": 0, "tag": 1, "length": half * LB})
        # While the payload goes out, free `threshold` beats of channel 1 and queue more data.
        for _ in range(threshold):
            ctx.set(dut.freed1, 1)
            await ctx.tick()
        ctx.set(dut.freed1, 0)
        await stream_put(ctx, dut.cmd0, {"link": 0, "tag": 2, "length": 2 * LB})
        spent = half + 2
        # More beats than the credits left: the command must wait.
        ctx.set(dut.cmd0.payload, {"link": 0, "tag": 3, "length": (DEPTH - spent + 1) * LB})
        ctx.set(dut.cmd0.valid, 1)
        for _ in range(60):
            assert not ctx.get(dut.cmd0.ready)
            await ctx.tick()
        assert ctx.get(dut.credits0) == DEPTH - spent
        ctx.set(dut.credit_in_valid, 1)
        ctx.set(dut.credit_in_channel, 0)
        ctx.set(dut.credit_in_count, 1)
        await ctx.tick()
        ctx.set(dut.credit_in_valid, 0)
        await ctx.tick().until(dut.cmd0.ready)
        ctx.set(dut.cmd0.valid, 0)
        await ctx.tick().until(~dut.active)
        assert ctx.get(dut.credits0) == 0

    run(dut, bench, background=[rec.run, feeder])
    frames = rec.frames()
    headers = [PacketHeader.from_bits(f[0][1] & ((1 << 64) - 1)) for f in frames]
    kinds = [(h.ptype, h.channel, h.length, len(f)) for h, f in zip(headers, frames)]
    assert kinds == [
        (PacketType.DATA, 0, half * LB, half + 1),
        (PacketType.CREDIT, 1, threshold, 1),
        (PacketType.DATA, 0, 2 * LB, 3),
        (PacketType.DATA, 0, (DEPTH - half - 1) * LB, DEPTH - half),
    ]
    payload = [beat[1] for f in frames if len(f) > 1 for beat in f[1:]]
    assert payload == list(range(len(payload)))


# -- RX buffer ------------------------------------------------------------------------------------

def test_rx_buffer_commit_rollback():
    dut = NicRxBuffer(CFG)
    got = []

    async def reader(ctx):
        ctx.set(dut.r.ready, 1)
        while True:
            _, _, valid, payload = await ctx.tick().sample(dut.r.valid, dut.r.payload)
            if valid:
                got.append(payload.data)

    async def bench(ctx):
        for packet, keep in (([1, 2, 3], True), ([4, 5], False), ([6], True)):
            for i, value in enumerate(packet):
                ctx.set(dut.w_en, 1)
                ctx.set(dut.w_data.data, value)
                last = i == len(packet) - 1
                ctx.set(dut.commit, last and keep)
                ctx.set(dut.rollback, last and not keep)
                await ctx.tick()
            ctx.set(dut.w_en, 0)
            ctx.set(dut.commit, 0)
            ctx.set(dut.rollback, 0)
        await ctx.tick().repeat(10)
        assert ctx.get(dut.free) == DEPTH

    run(dut, bench, background=[reader])
    assert got == [1, 2, 3, 6]


# -- RX link --------------------------------------------------------------------------------------

async def drive_beats(ctx, port, beats):
    for data, last in beats:
        ctx.set(port.tdata, data)
        ctx.set(port.tlast, last)
        ctx.set(port.tvalid, 1)
        await ctx.tick()
    ctx.set(port.tvalid, 0)


def test_rx_good_bad_and_credit_packets():
    """Good packets reach their channel; each malformed one is counted with its cause and dropped
    completely; a CREDIT packet is passed on; every RX FSM state visited."""
    dut = NicLinkRx(CFG)
    rng = random.Random(3)
    states = StateRecorder(dut)
    received = {0: [], 1: []}

    def reader(c):
        async def bench(ctx):
            out = getattr(dut, f"out{c}")
            ctx.set(out.ready, 1)
            while True:
                _, _, valid, payload = await ctx.tick().sample(out.valid, out.payload)
                if valid:
                    received[c].append(payload)
        return bench

    def data_hdr(channel, length, **kw):
        return make_packet_header(ptype=PacketType.DATA, src=9, channel=channel, tag=4,
                                  length=length, **kw)

    good0, good1 = rng.randbytes(37), rng.randbytes(16)
    bad_cases = [
        (frame_beats(data_hdr(0, 20, magic=3), rng.randbytes(20)), NicError.BAD_MAGIC),
        (frame_beats(data_hdr(0, 20, check=0x55), rng.randbytes(20)), NicError.BAD_CHECK),
        (frame_beats(data_hdr(2, 20), rng.randbytes(20)), NicError.BAD_CHANNEL),
        (frame_beats(data_hdr(0, 0), b"x"), NicError.BAD_LENGTH),
        (frame_beats(data_hdr(0, 40), rng.randbytes(20)), NicError.EARLY_TLAST),
        (frame_beats(data_hdr(0, 20), rng.randbytes(40)), NicError.MISSING_TLAST),
        ([(data_hdr(1, 20), 1)], NicError.EARLY_TLAST),
        (frame_beats(data_hdr(1, (DEPTH + 1) * LB), bytes((DEPTH + 1) * LB)), NicError.OVERFLOW),
        ([(make_packet_header(ptype=PacketType.CREDIT, channel=0, length=1), 1)],
         NicError.CREDIT_OVERFLOW),
    ]

    async def bench(ctx):
        for c in range(2):
            ctx.set(getattr(dut, f"credits{c}"), DEPTH)
        for beats, cause in bad_cases:
            await drive_beats(ctx, dut.link, beats)
            await drive_beats(ctx, dut.link, frame_beats(data_hdr(0, len(good0)), good0))
        await ctx.tick().repeat(4)
        assert ctx.get(dut.errors) == len(bad_cases)
        assert ctx.get(dut.error)
        assert ctx.get(dut.error_cause) == bad_cases[0][1]
        ctx.set(dut.error_clear, 1)
        await ctx.tick()
        ctx.set(dut.error_clear, 0)
        assert not ctx.get(dut.error)
        # A CREDIT packet within the buffer depth is accepted.
        ctx.set(dut.credits1, DEPTH - 4)
        credit = make_packet_header(ptype=PacketType.CREDIT, channel=1, length=3)
        ctx.set(dut.link.tdata, credit)
        ctx.set(dut.link.tlast, 1)
        ctx.set(dut.link.tvalid, 1)
        assert ctx.get(dut.credit_valid)
        assert (ctx.get(dut.credit_channel), ctx.get(dut.credit_count)) == (1, 3)
        await ctx.tick()
        ctx.set(dut.link.tvalid, 0)
        await drive_beats(ctx, dut.link, frame_beats(data_hdr(1, len(good1)), good1))
        await ctx.tick().repeat(6)
        assert ctx.get(dut.errors) == len(bad_cases)
        assert ctx.get(dut.payload_bytes) == len(bad_cases) * len(good0) + len(good1)

    async def cause_watch(ctx):
        # Record the cause code of every error as it happens.
        causes = []
        while True:
            _, _, errors, cause = await ctx.tick().sample(dut.errors, dut.error_cause)
            causes.append((errors, cause))
            cause_watch.causes = causes

    run(dut, bench, background=[states.run, reader(0), reader(1)])
    states.check()

    def packets(beats):
        out, cur = [], b""
        for beat in beats:
            cur += beat.data.to_bytes(LB, "little")[:bin(beat.keep).count("1")]
            if beat.last:
                out.append(cur)
                cur = b""
        return out
    assert packets(received[0]) == [good0] * len(bad_cases)
    assert packets(received[1]) == [good1]
    assert all(beat.src == 9 and beat.tag == 4 for beat in received[0])


@pytest.mark.parametrize("cause_index", range(9))
def test_rx_error_cause_each(cause_index):
    """Each malformed packet alone sets the sticky status with its own cause code."""
    dut = NicLinkRx(CFG)
    rng = random.Random(4)

    def data_hdr(channel, length, **kw):
        return make_packet_header(ptype=PacketType.DATA, channel=channel, length=length, **kw)
    cases = [
        (frame_beats(data_hdr(0, 20, magic=3), rng.randbytes(20)), NicError.BAD_MAGIC),
        (frame_beats(data_hdr(0, 20, check=0x55), rng.randbytes(20)), NicError.BAD_CHECK),
        (frame_beats(make_packet_header(ptype=3, length=16), bytes(16)), NicError.BAD_TYPE),
        (frame_beats(data_hdr(2, 20), rng.randbytes(20)), NicError.BAD_CHANNEL),
        (frame_beats(data_hdr(0, CFG.max_packet_bytes + 1), b"x"), NicError.BAD_LENGTH),
        (frame_beats(data_hdr(0, 40), rng.randbytes(20)), NicError.EARLY_TLAST),
        (frame_beats(data_hdr(0, 20), rng.randbytes(40)), NicError.MISSING_TLAST),
        (frame_beats(data_hdr(1, (DEPTH + 1) * LB), bytes((DEPTH + 1) * LB)), NicError.OVERFLOW),
        ([(make_packet_header(ptype=PacketType.CREDIT, channel=0, length=1), 1)],
         NicError.CREDIT_OVERFLOW),
    ]
    beats, cause = cases[cause_index]

    async def bench(ctx):
        for c in range(2):
            ctx.set(getattr(dut, f"credits{c}"), DEPTH)
        await drive_beats(ctx, dut.link, beats)
        await ctx.tick()
        assert ctx.get(dut.errors) == 1
        assert ctx.get(dut.error_cause) == cause

    run(dut, bench)


# -- whole NIC, link looped back ------------------------------------------------------------------

class Loopback(wiring.Component):
    def __init__(self, config):
        self.nic = NicInterface(config)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.nic = self.nic
        for l in range(self.nic.config.num_links):
            wiring.connect(m, getattr(self.nic, f"tx{l}"), getattr(self.nic, f"rx{l}"))
        return m


def test_nic_loopback_two_channels_and_bad_command():
    top = Loopback(CFG)
    nic = top.nic
    rng = random.Random(5)
    sends = {0: [(0, rng.randbytes(n)) for n in (100, 5, 512)],
             1: [(1, rng.randbytes(n)) for n in (17, 256)]}
    received = {0: b"", 1: b""}

    def sender(c):
        async def cmds(ctx):
            for i, (link, data) in enumerate(sends[c]):
                await stream_put(ctx, getattr(nic, f"ch{c}_send"),
                                 {"link": link, "tag": i, "length": len(data)})

        async def beats(ctx):
            for _, data in sends[c]:
                for beat in beats_of(data):
                    await stream_put(ctx, getattr(nic, f"ch{c}_send_data"), {"data": beat})
        return cmds, beats

    def reader(c):
        async def bench(ctx):
            port = getattr(nic, f"ch{c}_recv")
            ctx.set(getattr(nic, f"ch{c}_recv_link"), c)
            cycle = 0
            while True:
                ctx.set(port.ready, cycle % 3 != 0)
                _, _, valid, ready, beat = await ctx.tick().sample(port.valid, port.ready,
                                                                  port.payload)
                if valid and ready:
                    received[c] += beat.data.to_bytes(LB, "little")[:bin(beat.keep).count("1")]
                cycle += 1
        return bench

    async def main(ctx):
        total = {c: sum(len(d) for _, d in sends[c]) for c in sends}
        while any(len(received[c]) < total[c] for c in sends):
            await ctx.tick()
        await ctx.tick().repeat(30)
        for c in sends:
            assert received[c] == b"".join(d for _, d in sends[c])
        assert ctx.get(nic.link0_tx_payload_bytes) == total[0]
        assert ctx.get(nic.link0_rx_payload_bytes) == total[0]
        assert ctx.get(nic.link1_rx_payload_bytes) == total[1]
        assert ctx.get(nic.link0_rx_errors) == 0
        # Every freed beat was returned: credits back to full.
        for l in range(2):
            tx = getattr(nic, f"link{l}_tx_header_bytes")
            assert ctx.get(tx) == ctx.get(getattr(nic, f"link{l}_rx_header_bytes"))
        # A bad command (length 0) is taken, dropped and counted.
        await stream_put(ctx, nic.ch0_send, {"link": 0, "tag": 0, "length": 0})
        await ctx.tick()
        assert ctx.get(nic.cmd_errors) == 1 and ctx.get(nic.cmd_error)

    benches = [b for c in (0, 1) for b in sender(c)]
    run(top, main, *benches, background=[reader(0), reader(1)])
