"""Test top: two NIC interfaces (``a`` and ``b``) joined link by link through delay lines.

::

    a.tx{l} --> [ link_latency registers ] --> b.rx{l}
    a.rx{l} <-- [ link_latency registers ] <-- b.tx{l}

Every non-link port of each NIC appears on the top with an ``a_`` or ``b_`` prefix
(``a_ch0_send__payload``, ``b_link1_rx_errors``, ...). The receivers never stall, so the delay
lines are plain pipelines and the transmitters always see ``tready`` high.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ace.hw.nic.interface import NicInterface

__all__ = ["NicPairTop"]


class NicPairTop(wiring.Component):
    """Two :class:`NicInterface` instances back to back.

    Parameters
    ----------
    config : AceConfig
    link_latency : int
        Register stages on each link direction (at least 1).

    Members
    -------
    a_<port>, b_<port>
        Every port of the two NICs except ``tx{l}``/``rx{l}``.
    """

    def __init__(self, config, link_latency: int = 8):
        if link_latency < 1:
            raise ValueError(f"link_latency: {link_latency} is out of range; allowed: >= 1")
        self.config = config
        self.link_latency = link_latency
        self._nics = {"a": NicInterface(config), "b": NicInterface(config)}
        self._link_ports = {f"{d}{l}" for d in ("tx", "rx") for l in range(config.num_links)}
        members = {}
        for prefix, nic in self._nics.items():
            for name, member in nic.signature.members.items():
                if name not in self._link_ports:
                    members[f"{prefix}_{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for prefix, nic in self._nics.items():
            m.submodules[f"nic_{prefix}"] = nic
            for name, member in nic.signature.members.items():
                if name in self._link_ports:
                    continue
                outer = getattr(self, f"{prefix}_{name}")
                inner = getattr(nic, name)
                if member.is_signature:
                    if member.flow == In:
                        wiring.connect(m, wiring.flipped(outer), inner)
                    else:
                        wiring.connect(m, inner, wiring.flipped(outer))
                elif member.flow == In:
                    m.d.comb += inner.eq(outer)
                else:
                    m.d.comb += outer.eq(inner)

        a, b = self._nics["a"], self._nics["b"]
        for l in range(self.config.num_links):
            for src_name, src, dst in (("ab", getattr(a, f"tx{l}"), getattr(b, f"rx{l}")),
                                       ("ba", getattr(b, f"tx{l}"), getattr(a, f"rx{l}"))):
                m.d.comb += src.tready.eq(1)
                prev = (src.tvalid, src.tdata, src.tkeep, src.tlast)
                for stage in range(self.link_latency):
                    regs = (Signal(name=f"link{l}_{src_name}_s{stage}_tvalid"),
                            Signal.like(src.tdata, name=f"link{l}_{src_name}_s{stage}_tdata"),
                            Signal.like(src.tkeep, name=f"link{l}_{src_name}_s{stage}_tkeep"),
                            Signal(name=f"link{l}_{src_name}_s{stage}_tlast"))
                    m.d.sync += [reg.eq(value) for reg, value in zip(regs, prev)]
                    prev = regs
                m.d.comb += [dst.tvalid.eq(prev[0]), dst.tdata.eq(prev[1]),
                             dst.tkeep.eq(prev[2]), dst.tlast.eq(prev[3])]
        return m
