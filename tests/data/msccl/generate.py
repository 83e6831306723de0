"""Writes the MSCCL test algorithms of this folder, in the XML shape that msccl-tools emits and
the MSCCL runtime reads (every step with srcbuf/srcoff/dstbuf/dstoff, -1 where unused, depid,
deps, hasdep; <algo> with proto, nchannels, outofplace, minBytes, maxBytes).

    python tests/data/msccl/generate.py     # rewrites the .xml files beside it

* ``allpairs_allreduce_<p>gpus_<c>ch.xml``: all-pairs all-reduce, ``c`` instances: per gpu and
  instance one threadblock per peer (send and receive with that peer) and, numbered after all
  of those, one local threadblock that reduces the peers' contributions from scratch; ``c x p``
  threadblocks per gpu.
* ``ring_allreduce_8gpus_4chperring_LL.xml``: eight rings (strides 1, 3, 5, 7, twice) with four
  channels each, LL protocol: 32 threadblocks per gpu, cut-through steps (rrs, rrcs, rcs).
* ``hierarchical_allreduce_2x4gpus.xml``: two nodes of four gpus: reduce-scatter inside the
  node into scratch with local reductions, all-reduce of each block with the other node, then
  all-gather inside the node.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


class Algo:
    def __init__(self, name, ngpus, nchunks, proto="Simple", coll="allreduce", inplace=1):
        self.head = dict(name=name, proto=proto, nchannels=1, nchunksperloop=nchunks,
                         ngpus=ngpus, coll=coll, inplace=inplace, outofplace=1 - inplace,
                         minBytes=0, maxBytes=0)
        self.gpus = {g: {"chunks": (0, 0, 0), "tbs": []} for g in range(ngpus)}

    def tb(self, gpu, send, recv, chan):
        """A new threadblock; returns its index. Steps are added with :meth:`step`."""
        tbs = self.gpus[gpu]["tbs"]
        tbs.append({"send": send, "recv": recv, "chan": chan, "steps": []})
        self.head["nchannels"] = max(self.head["nchannels"], chan + 1)
        return len(tbs) - 1

    def step(self, gpu, tb, type_, src=None, dst=None, cnt=1, deps=()):
        """Add a step; ``src``/``dst`` are (buffer, chunk); ``deps`` (tb, step) pairs.
        Returns the step's index."""
        steps = self.gpus[gpu]["tbs"][tb]["steps"]
        steps.append(dict(type=type_, src=src, dst=dst, cnt=cnt, deps=list(deps)))
        return len(steps) - 1

    def xml(self) -> str:
        depended = {(g, d_tb, d_s) for g, gpu in self.gpus.items() for tb in gpu["tbs"]
                    for st in tb["steps"] for d_tb, d_s in st["deps"]}
        head = " ".join(f'{k}="{v}"' for k, v in self.head.items())
        out = [f"<algo {head}>"]
        for g, gpu in self.gpus.items():
            i, o, s = gpu["chunks"]
            out.append(f'  <gpu id="{g}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">')
            for t, tb in enumerate(gpu["tbs"]):
                out.append(f'    <tb id="{t}" send="{tb["send"]}" recv="{tb["recv"]}" '
                           f'chan="{tb["chan"]}">')
                for k, st in enumerate(tb["steps"]):
                    src, dst = st["src"] or ("i", -1), st["dst"] or ("o", -1)
                    depid = ",".join(str(d) for d, _ in st["deps"]) or "-1"
                    deps = ",".join(str(d) for _, d in st["deps"]) or "-1"
                    out.append(f'      <step s="{k}" type="{st["type"]}" srcbuf="{src[0]}" '
                               f'srcoff="{src[1]}" dstbuf="{dst[0]}" dstoff="{dst[1]}" '
                               f'cnt="{st["cnt"] if st["type"] != "nop" else 0}" '
                               f'depid="{depid}" deps="{deps}" '
                               f'hasdep="{int((g, t, k) in depended)}"/>')
                out.append("    </tb>")
            out.append("  </gpu>")
        out.append("</algo>")
        return "\n".join(out) + "\n"


def allpairs(p: int, instances: int) -> Algo:
    """Chunk ``b * instances + c`` is block b (owned by gpu b), instance c. Scratch slot
    ``k * instances + c`` holds the contribution of the k-th peer."""
    algo = Algo(f"allreduce_allpairs_{p}gpus_{instances}ch", p, p * instances)
    for r in range(p):
        peers = [q for q in range(p) if q != r]
        algo.gpus[r]["chunks"] = (p * instances, 0, (p - 1) * instances)
        peer_tbs = [{q: algo.tb(r, q, q, c) for q in peers} for c in range(instances)]
        locals_ = [algo.tb(r, -1, -1, c) for c in range(instances)]   # after all peer tbs
        for c, peer_tb, local in zip(range(instances), peer_tbs, locals_):
            mine = ("i", r * instances + c)
            for k, q in enumerate(peers):
                algo.step(r, peer_tb[q], "s", src=("i", q * instances + c))
                algo.step(r, peer_tb[q], "r", dst=("s", k * instances + c))
            last = None
            for k, q in enumerate(peers):
                last = algo.step(r, local, "re", src=("s", k * instances + c), dst=mine,
                                 deps=[(peer_tb[q], 1)])
            for q in peers:
                algo.step(r, peer_tb[q], "s", src=mine, deps=[(local, last)])
                algo.step(r, peer_tb[q], "r", dst=("i", q * instances + c))
    return algo


def ring(p: int, strides: list[int], per_ring: int) -> Algo:
    """Ring j (stride ``strides[j]``), instance i: chunks ``(j*per_ring + i)*p + 0..p-1``,
    chan ``j*per_ring + i``; position q of gpu m in the ring is ``m = q*stride mod p``."""
    rings = len(strides) * per_ring
    algo = Algo(f"allreduce_ring_{p}gpus_{per_ring}chperring", p, p * rings, proto="LL")
    for m in range(p):
        algo.gpus[m]["chunks"] = (p * rings, 0, 0)
    for j, stride in enumerate(strides):
        order = [(q * stride) % p for q in range(p)]
        assert sorted(order) == list(range(p)), "the stride must be coprime with p"
        for i in range(per_ring):
            chan = j * per_ring + i
            base = chan * p
            for q, m in enumerate(order):
                nxt, prv = order[(q + 1) % p], order[(q - 1) % p]
                t = algo.tb(m, nxt, prv, chan)
                chunk = [("i", base + (q - d) % p) for d in range(p + 1)]
                algo.step(m, t, "s", src=chunk[1])
                for d in range(2, p):
                    algo.step(m, t, "rrs", src=chunk[d])
                algo.step(m, t, "rrcs", src=chunk[0], dst=chunk[0])
                for d in range(1, p - 1):
                    algo.step(m, t, "rcs", dst=chunk[d])
                algo.step(m, t, "r", dst=chunk[p - 1])
    return algo


def hierarchical(nodes: int, local: int) -> Algo:
    """Gpu r = n*local + l owns block l (chunk l); scratch slot k (k < local-1) holds the k-th
    local peer's contribution, slot local-1 the other node's."""
    p = nodes * local
    assert nodes == 2, "one peer on the other node"
    algo = Algo(f"allreduce_hierarchical_{nodes}x{local}gpus", p, local)
    for r in range(p):
        n, l = divmod(r, local)
        algo.gpus[r]["chunks"] = (local, 0, local)
        peers = [n * local + x for x in range(local) if x != l]
        other = (1 - n) * local + l
        intra = {q: algo.tb(r, q, q, 0) for q in peers}
        inter = algo.tb(r, other, other, 0)
        red = algo.tb(r, -1, -1, 0)
        for k, q in enumerate(peers):
            algo.step(r, intra[q], "s", src=("i", q % local))
            algo.step(r, intra[q], "r", dst=("s", k))
        for k, q in enumerate(peers):
            algo.step(r, red, "re", src=("s", k), dst=("i", l), deps=[(intra[q], 1)])
        algo.step(r, inter, "s", src=("i", l), deps=[(red, local - 2)])
        algo.step(r, inter, "r", dst=("s", local - 1))
        done = algo.step(r, red, "re", src=("s", local - 1), dst=("i", l),
                         deps=[(inter, 1), (inter, 0)])
        for q in peers:
            algo.step(r, intra[q], "s", src=("i", l), deps=[(red, done)])
            algo.step(r, intra[q], "r", dst=("i", q % local))
    return algo


FILES = {
    "allpairs_allreduce_4gpus_2ch.xml": lambda: allpairs(4, 2),
    "allpairs_allreduce_8gpus_2ch.xml": lambda: allpairs(8, 2),
    "allpairs_allreduce_8gpus_4ch.xml": lambda: allpairs(8, 4),
    "ring_allreduce_8gpus_4chperring_LL.xml": lambda: ring(8, [1, 3, 5, 7, 1, 3, 5, 7], 4),
    "hierarchical_allreduce_2x4gpus.xml": lambda: hierarchical(2, 4),
}

if __name__ == "__main__":
    for name, make in FILES.items():
        (HERE / name).write_text(make().xml())
        print(HERE / name)
