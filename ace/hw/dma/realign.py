"""Byte realigner: shifts a packet of words by a byte offset across word boundaries.

Output word ``j`` of a packet is bytes ``shift .. shift + word_bytes - 1`` of the double word
``{in[j], in[j - 1]}`` (``in[-1]`` is zero, ``in[n]`` past the end is zero), with ``shift`` from
1 to ``word_bytes``; ``shift == word_bytes`` passes words through. Two per-packet flags make it
serve both DMA directions:

* ``drop_first``: the first input word only primes the shifter and yields no output (memory to
  SRAM: output ``j`` combines beats ``j`` and ``j + 1``);
* ``flush``: after the last input word one more output word is produced from it alone (the
  packet's bytes straddle one more word on the output side).

So a packet of ``n`` input words gives ``n - drop_first + flush`` output words. The flags,
``shift`` and ``meta`` are sampled with each word and must be constant within a packet; the
flush word carries the last input word's ``meta``. Output words carry ``first``/``last`` of the
output packet.

Pipeline (latency three cycles; throughput one word per cycle, plus one cycle for a flush
word):

1. an input skid buffer, so ``i.ready`` and everything after it come from registers;
2. the word rotated right by whole groups of bytes (the shift's upper bits);
3. the rotation finished by bytes (its lower bits), and each output byte taken from this
   rotated word or from the previous one (a per-byte choice that depends only on ``shift``,
   so it is decoded into registers in stage 2): the output register.

The shift of a packet is constant, so rotating every word by ``shift % word_bytes`` makes output
byte ``b`` byte ``b`` of either the rotated previous word (``b < word_bytes - shift``) or the
rotated current word: no shifter sees a control bit of the word in flight, and the zero word
before a packet and after a flushed one is a choice of those per-byte registers, not a mask on
the data. Each group of bytes has its own copy of the control registers (valid bits, the skid
buffer's ready, the flush state, the shift), and one more copy, with no bytes, carries the
per-word control (flags, meta, the output's first/last/meta), so no control net reaches the
whole word and no lane's load enables reach both bytes and the per-word control.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Realigner", "realign"]


def realign(words: list[bytes], shift: int, drop_first: bool, flush: bool,
            word_bytes: int) -> list[bytes]:
    """Golden model of one packet through :class:`Realigner`."""
    stream_ = [bytes(word_bytes)] + list(words) + [bytes(word_bytes)]
    out = []
    for j in range(len(words) + (1 if flush else 0)):
        if drop_first and j == 0:
            continue
        double = stream_[j] + stream_[j + 1]  # {in[j], in[j-1]} as little-endian bytes
        out.append(double[shift:shift + word_bytes])
    return out


class Realigner(wiring.Component):
    """Byte realigner (see the module docstring).

    Parameters
    ----------
    word_bytes : int
        Bytes per word.
    meta_shape : shape-like
        Side information carried from each input word to the output word it completes.
    lanes : int
        Groups of bytes with their own copy of the control registers (default: one per 2
        bytes). Behaviour is the same for any value.

    Members
    -------
    i : In(stream of {data, first, last, shift, drop_first, flush, meta})
    o : Out(stream of {data, first, last, meta})
    """

    def __init__(self, word_bytes: int, meta_shape=0, lanes: int | None = None):
        self.word_bytes = word_bytes
        self.meta_shape = meta_shape
        lanes = max(1, word_bytes // 2) if lanes is None else lanes
        assert word_bytes % lanes == 0
        self.lanes = lanes
        #: Sets of control registers: one per lane, plus, with more than one lane, one for the
        #: per-word control (flags, meta, the output's first/last/meta), which holds no data
        #: bytes, so no lane's load enables reach both bytes and the per-word control.
        self.control_sets = lanes + 1 if lanes > 1 else 1
        #: Optional: ``control_sets`` signals, each equal to ``o.ready`` in every cycle (copies
        #: of a registered ready downstream, e.g. :attr:`SkidBuffer.ready_copies`); set ``k``
        #: then takes its load enables from copy ``k`` instead of from ``o.ready``.
        self.o_ready_copies = None
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes), "first": unsigned(1), "last": unsigned(1),
                "shift": range(word_bytes + 1), "drop_first": unsigned(1),
                "flush": unsigned(1), "meta": meta_shape}))),
            "o": Out(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes), "first": unsigned(1), "last": unsigned(1),
                "meta": meta_shape}))),
        })

    #: Cycles from an input word to the output word it completes.
    latency = 3

    def elaborate(self, platform):
        m = Module()
        W = self.word_bytes
        lw = (W - 1).bit_length()               # bits of a rotation amount
        fine_bits = (lw + 1) // 2                 # rotated by bytes in stage 3
        coarse_bits = lw - fine_bits              # rotated by groups of bytes in stage 2
        group = 1 << fine_bits                    # bytes per coarse step
        lanes = self.lanes
        lane_bytes = W // lanes
        i = self.i.p
        shift_shape = range(W + 1)

        def byte(value, b):
            return value.word_select(b, 8)

        def prev_bytes(shift):
            """Byte b of an output word comes from the previous word: b < W - shift."""
            return Cat(*(shift < W - b for b in range(W)))

        # -- stage 1: input skid buffer (control, flags and meta in lane 0's slice) ---------
        ctl_layout = data.StructLayout({"first": 1, "last": 1, "drop_first": 1, "flush": 1,
                                        "meta": self.meta_shape})
        a_data = Signal(8 * W, name="a_data")
        s_data = Signal(8 * W, name="a_skid_data")
        a_ctl = Signal(ctl_layout, name="a_ctl")
        s_ctl = Signal(ctl_layout, name="a_skid_ctl")
        i_ctl = Signal(ctl_layout)
        m.d.comb += [i_ctl.first.eq(i.first), i_ctl.last.eq(i.last),
                     i_ctl.drop_first.eq(i.drop_first), i_ctl.flush.eq(i.flush),
                     i_ctl.meta.eq(i.meta)]

        # -- stage 2 registers (lane 0 holds the per-word control) ------------------------
        b_data = Signal(8 * W, name="b_data")       # rotated by whole groups
        b_use_prev = Signal(W, name="b_use_prev")   # output byte from the previous word
        b_use_cur = Signal(W, name="b_use_cur")     # output byte from this word
        b_emit = Signal(name="b_emit")              # the word yields an output word
        b_first = Signal(name="b_first")            # ... which is its packet's first
        b_last = Signal(name="b_last")              # ... or last
        b_meta = Signal(self.meta_shape, name="b_meta")
        b_shift = Signal(shift_shape, name="b_shift")   # the packet's shift (for the flush)
        started = Signal(name="started")            # an output word of this packet was made

        # -- stage 3 registers ---------------------------------------------------------------
        prev = Signal(8 * W, name="prev")           # the previous word, rotated
        out_data = Signal(8 * W, name="out_data")

        control = self.control_sets - 1     # the set that holds the per-word control
        for lane in range(self.control_sets):
            sfx = f"_{lane}"
            lo, hi = (lane * lane_bytes, (lane + 1) * lane_bytes) if lane < lanes else (0, 0)
            bits = slice(8 * lo, 8 * hi)
            has_bytes = hi > lo
            # Copies of the control registers, one set per lane and one for the per-word
            # control (``control``); lane 0's drive the ports.
            in_ready = Signal(init=1, name=f"in_ready{sfx}")
            a_valid = Signal(name=f"a_valid{sfx}")
            s_valid = Signal(name=f"a_skid_valid{sfx}")
            a_shift = Signal(shift_shape, name=f"a_shift{sfx}")
            s_shift = Signal(shift_shape, name=f"a_skid_shift{sfx}")
            b_valid = Signal(name=f"b_valid{sfx}")
            b_fine = Signal(max(1, fine_bits), name=f"b_fine{sfx}")
            flush_pending = Signal(name=f"flush_pending{sfx}")  # the flush word enters next
            c_valid = Signal(name=f"c_valid{sfx}")
            advance = Signal(name=f"advance{sfx}")   # stages 2 and 3 move
            a_ready = Signal(name=f"a_ready{sfx}")   # stage 1's word moves into stage 2
            take = Signal(name=f"take{sfx}")
            o_ready = (self.o.ready if self.o_ready_copies is None
                       else self.o_ready_copies[lane])
            m.d.comb += [
                advance.eq(~c_valid | o_ready),
                a_ready.eq(advance & ~flush_pending),
                take.eq(a_ready & a_valid),
            ]
            if lane == 0:
                m.d.comb += [self.i.ready.eq(in_ready), self.o.valid.eq(c_valid)]

            # Stage 1: a skid buffer (see SkidBuffer), this lane's bytes and shift copy.
            m.d.sync += in_ready.eq(a_ready | (~s_valid & (~a_valid | ~self.i.valid)))
            with m.If(in_ready):
                with m.If(a_ready | ~a_valid):
                    m.d.sync += [a_valid.eq(self.i.valid), a_shift.eq(i.shift)]
                    if has_bytes:
                        m.d.sync += a_data[bits].eq(i.data[bits])
                    if lane == control:
                        m.d.sync += a_ctl.eq(i_ctl)
                with m.Else():
                    m.d.sync += [s_valid.eq(self.i.valid), s_shift.eq(i.shift)]
                    if has_bytes:
                        m.d.sync += s_data[bits].eq(i.data[bits])
                    if lane == control:
                        m.d.sync += s_ctl.eq(i_ctl)
            with m.Elif(a_ready):
                m.d.sync += [a_valid.eq(s_valid), a_shift.eq(s_shift), s_valid.eq(0)]
                if has_bytes:
                    m.d.sync += a_data[bits].eq(s_data[bits])
                if lane == control:
                    m.d.sync += a_ctl.eq(s_ctl)

            # Stage 2: rotate by whole groups; decode the per-byte choice of stage 3.
            rot = a_shift[:lw] if lw else 0
            mask = prev_bytes(a_shift)
            flush_mask = prev_bytes(b_shift)
            with m.If(take):
                for b in range(lo, hi):
                    if coarse_bits:
                        cands = Cat(*(byte(a_data, (b + k * group) % W)
                                      for k in range(1 << coarse_bits)))
                        m.d.sync += byte(b_data, b).eq(
                            cands.word_select(rot[fine_bits:], 8))
                    else:
                        m.d.sync += byte(b_data, b).eq(byte(a_data, b))
                if fine_bits:
                    m.d.sync += b_fine.eq(rot[:fine_bits])
            with m.If(advance):
                m.d.sync += c_valid.eq(b_valid & b_emit)
                with m.If(flush_pending):
                    # The flush word: the previous (last) word alone.
                    m.d.sync += [b_valid.eq(1), flush_pending.eq(0)]
                    if has_bytes:
                        m.d.sync += [b_use_prev[lo:hi].eq(flush_mask[lo:hi]),
                                     b_use_cur[lo:hi].eq(0)]
                with m.Else():
                    m.d.sync += [b_valid.eq(a_valid),
                                 flush_pending.eq(a_valid & a_ctl.last & a_ctl.flush)]
                    if has_bytes:
                        m.d.sync += [
                            # A packet's first word has zeros before it.
                            b_use_prev[lo:hi].eq(mask[lo:hi]
                                                 & ~a_ctl.first.replicate(hi - lo)),
                            b_use_cur[lo:hi].eq(~mask[lo:hi]),
                        ]
                if lane == control:
                    with m.If(flush_pending):
                        m.d.sync += [b_emit.eq(1), b_first.eq(~started), b_last.eq(1),
                                     started.eq(0)]
                    with m.Elif(a_valid):
                        emit = ~(a_ctl.first & a_ctl.drop_first)
                        ends = a_ctl.last & ~a_ctl.flush
                        m.d.sync += [b_emit.eq(emit), b_first.eq(~started), b_last.eq(ends),
                                     b_meta.eq(a_ctl.meta), b_shift.eq(a_shift)]
                        with m.If(emit):
                            m.d.sync += started.eq(~ends)

            # Stage 3: finish the rotation by bytes, merge with the previous word. ``prev``
            # reloads on every move: when stage 2 holds no new word, its data is the word
            # already in ``prev``.
            with m.If(advance):
                for b in range(lo, hi):
                    if fine_bits:
                        cands = Cat(*(byte(b_data, (b + k) % W) for k in range(1 << fine_bits)))
                        cur = cands.word_select(b_fine, 8)
                    else:
                        cur = byte(b_data, b)
                    m.d.sync += [
                        byte(prev, b).eq(cur),
                        byte(out_data, b).eq((byte(prev, b) & b_use_prev[b].replicate(8))
                                             | (cur & b_use_cur[b].replicate(8))),
                    ]
                if lane == control:
                    m.d.sync += [self.o.p.first.eq(b_first), self.o.p.last.eq(b_last),
                                 self.o.p.meta.eq(b_meta)]
        m.d.comb += self.o.p.data.eq(out_data)
        return m
