"""Amaranth-simulator unit tests of the NIC: header check, TX link, RX link, RX buffer, and a
NicInterface with its link looped back."""

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.layouts import (NicError, PacketHeader, PacketType, make_packet_header,
                         packet_header_check)
from ace.hw.nic.interface import NicInterface
from ace.hw.nic.header import HeaderCheck
from ace.hw.nic.rx import RX_CHECK_STAGES, RX_COUNTER_DELAY, RX_PACKET_LATENCY, NicLinkRx
from ace.hw.nic.rx_buffer import NicRxBuffer
from ace.hw.nic.tx import TX_COMMAND_STAGES, TX_COUNTER_DELAY, NicLinkTx, credit_threshold

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
                await stream_put(ctx, dut.cmd[c],
                                 {"link": 0, "tag": 10 * c + i, "length": len(data)})

        async def beats(ctx):
            for data in payloads[c]:
                for beat in beats_of(data):
                    await stream_put(ctx, dut.data[c], {"data": beat})
        return cmds, beats

    async def finish(ctx):
        ctx.set(dut.node_id, 5)
        await ctx.tick().until(dut.cmd[0].valid)
        await ctx.tick().repeat(40)
        for c in range(2):
            used = sum(-(-n // LB) for n in lengths[c])
            assert ctx.get(dut.credits[c]) == DEPTH - used
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
        ctx.set(dut.data[0].valid, 1)
        value = 0
        while True:
            ctx.set(dut.data[0].payload, {"data": value})
            _, _, ready = await ctx.tick().sample(dut.data[0].ready)
            value += ready

    async def bench(ctx):
        await stream_put(ctx, dut.cmd[0], {"link": 0, "tag": 1, "length": half * LB})
        # While the payload goes out, free `threshold` beats of channel 1 and queue more data.
        for _ in range(threshold):
            ctx.set(dut.freed[1], 1)
            await ctx.tick()
        ctx.set(dut.freed[1], 0)
        await stream_put(ctx, dut.cmd[0], {"link": 0, "tag": 2, "length": 2 * LB})
        spent = half + 2
        # More beats than the credits left: the command must wait.
        ctx.set(dut.cmd[0].payload, {"link": 0, "tag": 3, "length": (DEPTH - spent + 1) * LB})
        ctx.set(dut.cmd[0].valid, 1)
        for _ in range(60):
            assert not ctx.get(dut.cmd[0].ready)
            await ctx.tick()
        assert ctx.get(dut.credits[0]) == DEPTH - spent
        ctx.set(dut.credit_in_valid, 1)
        ctx.set(dut.credit_in_channel, 0)
        ctx.set(dut.credit_in_count, 1)
        await ctx.tick()
        ctx.set(dut.credit_in_valid, 0)
        await ctx.tick().until(dut.cmd[0].ready)
        ctx.set(dut.cmd[0].valid, 0)
        await ctx.tick().until(~dut.busy[0])
        assert ctx.get(dut.credits[0]) == 0

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


READY_PATTERNS = {
    "always": lambda rng, t: True,
    "every_other": lambda rng, t: t % 2 == 0,
    "stall_every_cycle": lambda rng, t: t % 3 == 2,    # ready one cycle in three
    "random": lambda rng, t: rng.random() < 0.6,
}


@pytest.mark.parametrize("pattern", sorted(READY_PATTERNS))
def test_rx_buffer_random_traffic(pattern):
    """Random packets, each committed or rolled back, written back to back or with idle cycles
    while the reader stalls by ``pattern``: the reader gets exactly the committed packets in
    order (golden model: a list), every ``freed`` pulse is one beat delivered, a stalled head
    never changes, and the buffer is never written beyond its depth (the writer counts the
    space as the RX does, from ``freed``)."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    ready_at = READY_PATTERNS[pattern]
    dut = NicRxBuffer(CFG)
    expected, got, freed = [], [], []
    cycle = {"now": 0}

    async def reader(ctx):
        held = None
        while True:
            ready = ready_at(rng, cycle["now"])
            ctx.set(dut.r.ready, ready)
            _, _, valid, payload, fr = await ctx.tick().sample(dut.r.valid, dut.r.payload,
                                                               dut.freed)
            freed.append(fr)
            if valid and held is not None:
                assert payload.data == held, f"seed {seed}: stalled head changed"
            held = None
            if valid and ready:
                got.append(payload.data)
            elif valid:
                held = payload.data
            cycle["now"] += 1

    async def bench(ctx):
        in_use = 0           # committed beats not yet freed, plus the packet being written
        for n in range(60):
            beats = rng.randint(1, 8)
            keep = rng.random() < 0.75
            while in_use - sum(freed) + beats > DEPTH:
                await ctx.tick()
            values = [rng.getrandbits(128) for _ in range(beats)]
            for i, value in enumerate(values):
                last = i == beats - 1
                ctx.set(dut.w_en, 1)
                ctx.set(dut.w_data.data, value)
                ctx.set(dut.commit, last and keep)
                ctx.set(dut.rollback, last and not keep)
                await ctx.tick()
                if rng.random() < 0.3:
                    ctx.set(dut.w_en, 0)
                    ctx.set(dut.commit, 0)
                    ctx.set(dut.rollback, 0)
                    await ctx.tick().repeat(rng.randint(1, 3))
            ctx.set(dut.w_en, 0)
            ctx.set(dut.commit, 0)
            ctx.set(dut.rollback, 0)
            if keep:
                expected.extend(values)
                in_use += beats
        while len(got) < len(expected):
            await ctx.tick()
        await ctx.tick().repeat(10)
        assert ctx.get(dut.free) == DEPTH, f"seed {seed}"

    run(dut, bench, background=[reader], deadline=20000)
    assert got == expected, f"seed {seed}"
    assert sum(freed) == len(expected), f"seed {seed}"


def test_rx_buffer_back_to_back_full_rate():
    """A whole buffer of committed beats drains at one beat per cycle with the reader always
    ready, the first ``commit_latency`` cycles after its commit, and a packet committed while
    the previous one drains follows with no gap."""
    dut = NicRxBuffer(CFG)
    taken = []

    async def reader(ctx):
        ctx.set(dut.r.ready, 1)
        t = 0
        while True:
            _, _, valid, payload = await ctx.tick().sample(dut.r.valid, dut.r.payload)
            if valid:
                taken.append((t, payload.data))
            t += 1

    async def bench(ctx):
        for value in range(DEPTH):
            ctx.set(dut.w_en, 1)
            ctx.set(dut.w_data.data, value + 1)
            ctx.set(dut.commit, value in (DEPTH // 2 - 1, DEPTH - 1))
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        ctx.set(dut.commit, 0)
        await ctx.tick().repeat(DEPTH + 10)

    run(dut, bench, background=[reader])
    assert [v for _, v in taken] == list(range(1, DEPTH + 1))
    times = [t for t, _ in taken]
    assert times[0] == DEPTH // 2 - 1 + NicRxBuffer.commit_latency   # commit in that cycle
    assert times == list(range(times[0], times[0] + DEPTH)), "a gap in the drain"


def test_rx_buffer_reset_mid_stream():
    """A reset while beats are in flight in the RAM and held in its output register: empty
    afterwards (no beat valid, all space free), and the next packet comes out intact."""
    buf = NicRxBuffer(CFG)
    rst = Signal()
    dut = ResetInserter(rst)(buf)
    got = []
    phase = {"after": False}

    async def reader(ctx):
        while True:
            ready = phase["after"]
            ctx.set(buf.r.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(buf.r.valid, buf.r.payload)
            if valid and ready:
                got.append(payload.data)

    async def write(ctx, values):
        for i, value in enumerate(values):
            ctx.set(buf.w_en, 1)
            ctx.set(buf.w_data.data, value)
            ctx.set(buf.commit, i == len(values) - 1)
            await ctx.tick()
        ctx.set(buf.w_en, 0)
        ctx.set(buf.commit, 0)

    async def bench(ctx):
        await write(ctx, list(range(100, 110)))
        await ctx.tick().repeat(5)                 # the RAM pipeline fills and stalls
        assert ctx.get(buf.r.valid)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        assert not ctx.get(buf.r.valid)
        assert ctx.get(buf.free) == DEPTH
        phase["after"] = True
        await write(ctx, [7, 8, 9])
        await ctx.tick().repeat(12)

    run(dut, bench, background=[reader])
    assert got == [7, 8, 9]


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
            out = dut.out[c]
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
            ctx.set(dut.credits[c], DEPTH)
        for beats, cause in bad_cases:
            await drive_beats(ctx, dut.link, beats)
            await drive_beats(ctx, dut.link, frame_beats(data_hdr(0, len(good0)), good0))
        await ctx.tick().repeat(RX_CHECK_STAGES + 4)
        assert ctx.get(dut.errors) == len(bad_cases)
        assert ctx.get(dut.error)
        assert ctx.get(dut.error_cause) == bad_cases[0][1]
        ctx.set(dut.error_clear, 1)
        await ctx.tick()
        ctx.set(dut.error_clear, 0)
        assert not ctx.get(dut.error)
        # A CREDIT packet within the buffer depth is accepted.
        ctx.set(dut.credits[1], DEPTH - 4)
        credit = make_packet_header(ptype=PacketType.CREDIT, channel=1, length=3)
        await drive_beats(ctx, dut.link, [(credit, 1)])
        for _ in range(RX_CHECK_STAGES - 1):       # taken RX_CHECK_STAGES cycles after the beat
            assert not ctx.get(dut.credit_valid)
            await ctx.tick()
        assert ctx.get(dut.credit_valid)
        assert (ctx.get(dut.credit_channel), ctx.get(dut.credit_count)) == (1, 3)
        await drive_beats(ctx, dut.link, frame_beats(data_hdr(1, len(good1)), good1))
        await ctx.tick().repeat(RX_PACKET_LATENCY)
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
            ctx.set(dut.credits[c], DEPTH)
        await drive_beats(ctx, dut.link, beats)
        await ctx.tick().repeat(RX_CHECK_STAGES + 1 + RX_COUNTER_DELAY)
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


def test_recv_link_change_keeps_beats_fetched_ahead():
    """A channel that reads one packet from link 0 and then, right after its last beat, reads
    link 1 gets link 1's packet, and link 0's next packet later, intact: the beats the NIC
    fetched ahead on link 0 stay with link 0 (a register after the link mux would hand them to
    the step reading link 1)."""
    top = Loopback(CFG)
    nic = top.nic
    rng = random.Random(11)
    packets = [(0, 3, rng.randbytes(3 * LB)), (1, 7, rng.randbytes(2 * LB + 5)),
               (0, 4, rng.randbytes(4 * LB))]
    received = []

    async def bench(ctx):
        for link, tag, data in packets:
            await stream_put(ctx, nic.ch0_send, {"link": link, "tag": tag, "length": len(data)})
            for beat in beats_of(data):
                await stream_put(ctx, nic.ch0_send_data, {"data": beat})
        await ctx.tick().repeat(60)                 # every packet buffered in its link's RX
        port = nic.ch0_recv
        for link in (0, 1, 0):
            ctx.set(nic.ch0_recv_link, link)
            ctx.set(port.ready, 1)
            data, last = b"", False
            while not last:
                _, _, valid, beat = await ctx.tick().sample(port.valid, port.payload)
                if valid:
                    data += beat.data.to_bytes(LB, "little")[:bin(beat.keep).count("1")]
                    last = beat.last
                    tag = beat.tag
            received.append((link, tag, data))
        ctx.set(port.ready, 0)

    run(top, bench)
    assert received == packets

# -- pipeline stages: TX line rate and latency, RX state checks at line rate, reset --

def tx_send_all(dut, payloads, node_id=5):
    """Testbenches offering each channel's commands and beats to a NicLinkTx as fast as it takes
    them. ``payloads[c]`` is a list of (tag, bytes)."""
    def channel_bench(c):
        async def cmds(ctx):
            for tag, data in payloads[c]:
                await stream_put(ctx, dut.cmd[c], {"link": 0, "tag": tag, "length": len(data)})

        async def beats(ctx):
            for _, data in payloads[c]:
                for beat in beats_of(data):
                    await stream_put(ctx, dut.data[c], {"data": beat})
        return cmds, beats

    async def setup(ctx):
        ctx.set(dut.node_id, node_id)
    return [setup] + [b for c in payloads for b in channel_bench(c)]


def tx_ready_copies_agree(dut, seen):
    """Background testbench: in every cycle each channel's ``data_ready_copies[c]`` (a register
    computed a cycle ahead in this form) equals ``data[c].ready``; ``seen`` gets, per cycle,
    whether any channel's ready was high (so the check is not only of idle cycles)."""
    n = len(dut.data)

    async def bench(ctx):
        cycle = 0
        while True:
            _, _, *values = await ctx.tick().sample(*dut.data_ready_copies,
                                                    *(data.ready for data in dut.data))
            assert values[:n] == values[n:], f"cycle {cycle}: copies {values[:n]}, " \
                                             f"ready {values[n:]}"
            seen.append(any(values[n:]))
            cycle += 1
    return bench


def check_frames(frames, payloads):
    """Every frame is a good DATA packet whose payload is the one sent with its tag."""
    by_tag = {tag: data for c in payloads for tag, data in payloads[c]}
    for frame in frames:
        hdr = PacketHeader.from_bits(frame[0][1] & ((1 << 64) - 1))
        assert hdr.check == packet_header_check(frame[0][1])
        got = b"".join(beat[1].to_bytes(LB, "little")[:bin(beat[2]).count("1")]
                       for beat in frame[1:])
        assert got == by_tag.pop(hdr.tag)
    assert not by_tag, f"packets not sent: {sorted(by_tag)}"


@pytest.mark.parametrize("n_beats", [1, 2, 5])
def test_tx_header_overhead_and_latency(n_beats):
    """Measured link cycles per packet: two channels interleaved, n + 1 cycles for every n (no
    idle cycle); one channel alone, n + 1 for n >= 2 and 3 for n = 1 (the overhead the grant
    register adds). The first header leaves TX_COMMAND_STAGES cycles after the command."""
    for channels in ((0, 1), (0,)):
        dut = NicLinkTx(CFG)
        rng = random.Random(7 + n_beats)
        payloads = {c: [(10 * c + i, rng.randbytes(n_beats * LB)) for i in range(6)]
                    for c in channels}
        rec = LinkRecorder(dut.link)
        first_cmd = []

        async def watch_cmd(ctx):
            cycle = 0
            while True:
                _, _, valid = await ctx.tick().sample(dut.cmd[0].valid)
                if valid and not first_cmd:
                    first_cmd.append(cycle)
                cycle += 1

        async def finish(ctx):
            await ctx.tick().repeat(40 + 12 * (n_beats + 2))

        seen = []
        run(dut, finish, *tx_send_all(dut, payloads),
            background=[rec.run, watch_cmd, tx_ready_copies_agree(dut, seen)])
        assert any(seen)
        frames = rec.frames()
        check_frames(frames, payloads)
        starts = [frame[0][0] for frame in frames]
        per_packet = {b - a for a, b in zip(starts, starts[1:])}
        expect = n_beats + 1 if len(channels) == 2 or n_beats >= 2 else 3
        assert per_packet == {expect}, f"{channels}: header spacing {per_packet}"
        assert starts[0] - first_cmd[0] == TX_COMMAND_STAGES


@pytest.mark.parametrize("pattern", [[0, 1], [1, 0, 0], None])
def test_tx_stall_every_cycle_and_credit_exhaustion(pattern):
    """Link backpressure on every other (or two of three, or random) cycles: every frame intact
    and AXI-Stream stable (a stalled beat does not change); a channel that runs out of credits
    stops exactly when its credits are spent and resumes on each credit return."""
    seed = 8
    rng = random.Random(seed)
    ready = pattern or [int(rng.random() < 0.5) for _ in range(97)]
    dut = NicLinkTx(CFG)
    sizes = [DEPTH // 2, DEPTH // 2, 3, DEPTH // 4]       # beats; the third does not fit
    payloads = {0: [(i, rng.randbytes(n * LB)) for i, n in enumerate(sizes)]}
    rec = LinkRecorder(dut.link, ready_pattern=ready)
    held = []

    async def stability(ctx):
        prev = None
        while True:
            _, _, valid, rdy, data, last = await ctx.tick().sample(
                dut.link.tvalid, dut.link.tready, dut.link.tdata, dut.link.tlast)
            if prev is not None:
                assert valid and (data, last) == prev, f"seed {seed}: stalled beat changed"
            prev = (data, last) if valid and not rdy else None
            held.append(prev is not None)

    async def bench(ctx):
        await ctx.tick().until(dut.credits[0] == 0)
        for _ in range(400):
            await ctx.tick()
            if len(rec.frames()) == 2:
                break
        await ctx.tick().repeat(60)
        assert len(rec.frames()) == 2, f"seed {seed}: sent without credits"
        for returned in range(1, 4):          # the third packet needs 3 credits
            ctx.set(dut.credit_in_valid, 1)
            ctx.set(dut.credit_in_count, 1)
            await ctx.tick()
            ctx.set(dut.credit_in_valid, 0)
            await ctx.tick().repeat(20)
            if returned < 3:
                assert (len(rec.frames()), ctx.get(dut.credits[0])) == (2, returned)
        assert (len(rec.frames()), ctx.get(dut.credits[0])) == (3, 0)
        ctx.set(dut.credit_in_valid, 1)
        ctx.set(dut.credit_in_count, DEPTH)
        await ctx.tick()
        ctx.set(dut.credit_in_valid, 0)
        await ctx.tick().repeat(8 * DEPTH)
        assert ctx.get(dut.credits[0]) == DEPTH - DEPTH // 4

    seen = []
    run(dut, bench, *tx_send_all(dut, payloads),
        background=[rec.run, stability, tx_ready_copies_agree(dut, seen)], deadline=40000)
    check_frames(rec.frames(), payloads)
    assert any(held), "the pattern never stalled a beat"
    assert any(seen)


def test_tx_counters_follow_the_link():
    """Each TX counter equals what the link carried up to TX_COUNTER_DELAY cycles before, in
    every cycle: beats taken, stalls, header beats and payload bytes, counted from the link
    port itself, under backpressure and with packets of both channels and odd lengths."""
    rng = random.Random(11)
    dut = NicLinkTx(CFG)
    payloads = {c: [(10 * c + i, rng.randbytes(rng.randrange(1, 5 * LB))) for i in range(5)]
                for c in (0, 1)}
    ready = [int(rng.random() < 0.7) for _ in range(53)]
    seen = {"busy": [], "stall": [], "header": [], "payload": []}   # per cycle: 0/1 or bytes
    checked = []

    async def watch(ctx):
        first = True            # the next beat taken starts a frame: a header
        cycle = 0
        while True:
            ctx.set(dut.link.tready, ready[cycle % len(ready)])
            _, _, valid, rdy, keep, last, *counts = await ctx.tick().sample(
                dut.link.tvalid, dut.link.tready, dut.link.tkeep, dut.link.tlast,
                dut.busy_cycles, dut.stall_cycles, dut.header_bytes, dut.payload_bytes)
            # what the counters show in this cycle: the events up to DELAY + 1 cycles ago
            upto = len(seen["busy"]) - TX_COUNTER_DELAY
            expect = [sum(seen[k][:max(0, upto)]) for k in ("busy", "stall", "header",
                                                             "payload")]
            assert counts == expect, f"cycle {cycle}: counters {counts}, link says {expect}"
            checked.append(cycle)
            taken = valid and rdy
            seen["busy"].append(int(taken))
            seen["stall"].append(int(valid and not rdy))
            seen["header"].append(LB if taken and first else 0)
            seen["payload"].append(bin(keep).count("1") if taken and not first else 0)
            if taken:
                first = bool(last)
            cycle += 1

    async def finish(ctx):
        await ctx.tick().repeat(400)

    run(dut, finish, *tx_send_all(dut, payloads), background=[watch])
    assert sum(seen["header"]) == 10 * LB and sum(seen["stall"]) > 0
    assert sum(seen["payload"]) == sum(len(d) for c in payloads for _, d in payloads[c])
    assert len(checked) >= 400


def error_watcher(dut, causes):
    """Background testbench: appends each new error's cause (a change of ``errors``) of a
    ``NicLinkRx`` to ``causes`` and clears it. Two errors a cycle apart count once."""
    async def watch(ctx):
        seen = 0
        while True:
            _, _, errors, cause = await ctx.tick().sample(dut.errors, dut.error_cause)
            if errors != seen:
                causes.append(cause)
                seen = errors
                ctx.set(dut.error_clear, 1)
            else:
                ctx.set(dut.error_clear, 0)
    return watch


def test_rx_state_checks_at_line_rate():
    """Back-to-back frames where the previous frame changes the state a header check reads:
    a rolled-back packet gives its space back at once (a full-depth packet right after it is
    accepted); a packet's reservation counts for the next header (a second packet that no
    longer fits is OVERFLOW); a CREDIT packet counts for a CREDIT right behind it on the same
    channel (CREDIT_OVERFLOW). Nothing is read from the buffers meanwhile."""
    dut = NicLinkRx(CFG)
    rng = random.Random(9)
    causes = []

    def data(channel, beats, extra=0):
        return frame_beats(make_packet_header(ptype=PacketType.DATA, channel=channel,
                                              length=beats * LB),
                           rng.randbytes((beats + extra) * LB))

    def credit(channel, count):
        return [(make_packet_header(ptype=PacketType.CREDIT, channel=channel, length=count), 1)]

    half = DEPTH // 2
    early = data(0, DEPTH)[:-2] + [(data(0, 1)[1][0], 1)]          # tlast two beats early
    frames = [
        (early, NicError.EARLY_TLAST),
        (data(0, DEPTH), None),                       # the whole buffer, right after rollback
        (data(1, half + 1), None),
        (data(1, half), NicError.OVERFLOW),           # half + 1 reserved, half - 1 left
        (data(1, half - 1), None),                    # exactly what is left
        (credit(0, DEPTH - 10), None),
        (credit(0, 8), None),                         # 2 x ... within the depth: fine
        (credit(0, 3), NicError.CREDIT_OVERFLOW),     # beyond it, counting both returns
    ]

    async def tx_credits(ctx):
        # The link's TX as the RX sees it: a returned credit adds to its count a cycle later.
        held = [0] * CFG.num_channels
        while True:
            for c, count in enumerate(held):
                ctx.set(dut.credits[c], count)
            _, _, valid, channel, count = await ctx.tick().sample(
                dut.credit_valid, dut.credit_channel, dut.credit_count)
            if valid:
                held[channel] += count

    async def bench(ctx):
        for c in range(CFG.num_channels):
            ctx.set(dut.out[c].ready, 0)
        await drive_beats(ctx, dut.link, [beat for frame, _ in frames for beat in frame])
        await ctx.tick().repeat(RX_CHECK_STAGES + 4)
        assert ctx.get(dut.payload_bytes) == (DEPTH + half + 1 + half - 1) * LB

    run(dut, bench, background=[error_watcher(dut, causes), tx_credits])
    assert causes == [cause for _, cause in frames if cause is not None]


#: Space counters wider than a packet's beat count (the harness's 512-beat buffers, 256-beat
#: packets), narrower (``small``: 32 and 64) and one-beat packets.
SPACE_CONFIGS = {
    "small": CFG,
    "deep": CFG.replace(num_channels=4, rx_channel_beats=512, max_packet_bytes=4096),
    "one_beat": CFG.replace(rx_channel_beats=8, max_packet_bytes=16),
}


@pytest.mark.parametrize("name", sorted(SPACE_CONFIGS))
def test_rx_space_random_packets(name):
    """Random DATA packets on random channels, nothing read, until every buffer is full: each
    header's verdict follows a model of the free space (OVERFLOW for a packet larger than what
    is left, EARLY_TLAST giving its space back, exact fits accepted), and the payload counter
    counts the accepted lengths. Packets follow each other back to back where no two errors
    would meet."""
    cfg = SPACE_CONFIGS[name]
    lb, depth, most = cfg.link_bytes, cfg.rx_channel_beats, cfg.max_packet_beats
    seed = {"small": 21, "deep": 22, "one_beat": 23}[name]
    rng = random.Random(seed)
    dut = NicLinkRx(cfg)
    left = [depth] * cfg.num_channels
    frames, accepted = [], 0                       # (beats, cause or None), bytes accepted
    while any(left) and len(frames) < 40 * cfg.num_channels:
        c = rng.randrange(cfg.num_channels)
        roll = rng.random()
        if roll < 0.3 and 0 < left[c] <= most:
            beats = left[c]                                      # exactly what is left
        elif roll < 0.45 and left[c] < most:
            beats = rng.randint(left[c] + 1, most)               # one beat or more too many
        else:
            beats = rng.randint(1, most)
        length = beats * lb - rng.randrange(lb)
        beat_list = frame_beats(make_packet_header(ptype=PacketType.DATA, channel=c,
                                                   length=length), rng.randbytes(length))
        if beats > left[c]:
            cause = NicError.OVERFLOW
        elif beats >= 2 and rng.random() < 0.15:
            beat_list = beat_list[:-2] + [(beat_list[-2][0], 1)]          # tlast a beat early
            cause = NicError.EARLY_TLAST
        else:
            cause = None
            left[c] -= beats
            accepted += length
        frames.append((beat_list, cause))
    causes = []

    async def bench(ctx):
        for c in range(cfg.num_channels):
            ctx.set(dut.out[c].ready, 0)
            ctx.set(dut.credits[c], 0)
        for i, (beat_list, cause) in enumerate(frames):
            await drive_beats(ctx, dut.link, beat_list)
            after = frames[i + 1][1] if i + 1 < len(frames) else None
            # Back to back unless this frame and the next are both errors (the error cause
            # register keeps the first until the watcher clears it).
            gap = 6 if cause is not None and after is not None else rng.choice([0, 0, 1, 3])
            for _ in range(gap):
                await ctx.tick()
        await ctx.tick().repeat(RX_CHECK_STAGES + RX_COUNTER_DELAY + 8)
        assert ctx.get(dut.payload_bytes) == accepted, f"seed {seed}"

    run(dut, bench, background=[error_watcher(dut, causes)], deadline=100000)
    assert causes == [cause for _, cause in frames if cause is not None], f"seed {seed}"
    assert not any(left), f"seed {seed}: the model left space {left}; more frames needed"


def test_nic_reset_mid_packet():
    """A reset in the middle of a packet (on both ends of the looped-back link) returns the NIC
    to its initial state: full credits, empty buffers, zero counters; the traffic sent after it
    arrives intact with no error."""
    top = Loopback(CFG)
    nic = top.nic
    rst = Signal()
    dut = ResetInserter(rst)(top)
    rng = random.Random(10)
    before = rng.randbytes(400)
    after = [rng.randbytes(n) for n in (300, 17, 512)]
    received = bytearray()
    phase = {"after": False}

    async def reader(ctx):
        port = nic.ch0_recv
        ctx.set(port.ready, 1)
        while True:
            _, _, valid, beat = await ctx.tick().sample(port.valid, port.payload)
            if valid and phase["after"]:
                received.extend(beat.data.to_bytes(LB, "little")[:bin(beat.keep).count("1")])

    async def bench(ctx):
        await stream_put(ctx, nic.ch0_send, {"link": 0, "tag": 1, "length": len(before)})
        for beat in beats_of(before)[:10]:
            await stream_put(ctx, nic.ch0_send_data, {"data": beat})
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(nic.ch0_send_data.valid, 0)
        assert ctx.get(nic.link0_tx_payload_bytes) == 0
        assert ctx.get(nic.link0_rx_errors) == 0
        phase["after"] = True
        for i, data in enumerate(after):
            await stream_put(ctx, nic.ch0_send, {"link": 0, "tag": 2 + i, "length": len(data)})
            for beat in beats_of(data):
                await stream_put(ctx, nic.ch0_send_data, {"data": beat})
        total = sum(len(d) for d in after)
        while len(received) < total:
            await ctx.tick()
        await ctx.tick().repeat(40)
        assert bytes(received) == b"".join(after)
        assert ctx.get(nic.link0_tx_payload_bytes) == total
        assert ctx.get(nic.link0_rx_payload_bytes) == total
        assert ctx.get(nic.link0_rx_errors) == 0 and not ctx.get(nic.link0_rx_error)

    run(dut, bench, background=[reader])
