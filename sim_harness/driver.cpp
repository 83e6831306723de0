// ACE harness driver: runs a Verilated ACE system with no Python on the per-cycle path: NODES
// engine models (Vengine, the engine library of sim_harness/simulator.py, built once per engine
// configuration) connected to one fabric model (Vtop: the memory, link and switch models of
// sim_harness/system.py, host="driver"). sim_harness/simulator.py builds it together with a
// generated system_ports.h (node count, the copies of engine ports to and from the fabric,
// counter accessors) and talks to it over stdin/stdout, one command per line, one reply line
// per command ("ok ..." or "err <message>"):
//
//   reset N                         hold reset N cycles
//   rates MEM_Q8 BG_Q16 MEM_LAT LINK_Q8 LINK_LAT
//                                   memory/link rates (bytes/cycle x 256), background share
//                                   (x 65536) and latencies, for every node and link
//   load NODE ADDR PATH             copy a file into node memory at byte ADDR
//   dump NODE ADDR LEN PATH         write LEN bytes of node memory from byte ADDR to a file
//   csr N                           then N lines "NODE w ADDR DATA" or "NODE r ADDR": AXI4-Lite
//                                   accesses, in order per node, all nodes at once;
//                                   reply "ok CYCLE READ..." (reads in the order given)
//   run TIMEOUT INTERVAL NREG REG... run until every node's irq is high (or TIMEOUT cycles),
//                                   sampling every INTERVAL cycles the memory and link byte
//                                   counters and the CSRs REG... of every node; reply
//                                   "samples K", K lines "CYCLE MEM_RD.. MEM_WR.. LINK.. REG..",
//                                   then "ok CYCLE done|timeout"
//   waves PATH                      start an FST waveform (builds with waves only); one cycle
//                                   is 1 ns of waveform time (the harness engines' 1 GHz)
//   cycle                           reply "ok CYCLE"
//   quit
//
// Memory words live here (DPI functions ace_ram_read32/ace_ram_write32 of ace_sim_ram_dpi), so
// load and dump take no simulated cycles. They are sparse: a page is allocated when it is first
// written, so a node's memory can be gigabytes while a run touches megabytes. An AXI4-Lite
// SLVERR/DECERR makes a csr reply "err".
//
// One cycle (tick): the combinational paths between the engines and the fabric (a memory
// model's wready follows the engine's wvalid, a switch port's grant its tvalid) are settled
// first: the fabric is evaluated with the engines' outputs, then the engines with the fabric's
// (one pass: an engine has no input-to-output path); then every model takes the rising edge
// with those settled inputs. An engine's wrapper registers its inputs at the falling edge
// (engine_sim_verilog), which is exact because the inputs are set before that evaluation and
// hold until the rising edge. The result is the cycle-exact behaviour of the same system as
// one design.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "Vengine.h"
#include "Vtop.h"
#include "Vtop__Dpi.h"
#include "verilated.h"
#if VM_TRACE
#include "verilated_fst_c.h"
#endif

struct AxilIn {
    uint32_t awaddr = 0, wdata = 0, araddr = 0;
    uint8_t awvalid = 0, wvalid = 0, bready = 0, arvalid = 0, rready = 0;
};
struct AxilOut {
    uint32_t rdata = 0;
    uint8_t awready = 0, wready = 0, bvalid = 0, bresp = 0, arready = 0, rvalid = 0, rresp = 0;
};

#ifdef ACE_PGO_GENERATE
// The instrumented build of a profile-guided one (simulator.py, build_driver(pgo=True)):
// _Exit skips the exit handler that writes the profile, so quit writes it first.
extern "C" void __gcov_dump(void);
#endif
#include "system_ports.h"  // NODES, MEM_BYTES, LINKS, LINK_NODE[], LINK_INDEX[], port copies

// A node's memory of MEM_BYTES: 64 KiB pages, allocated (zeroed) when first written; a page
// never written reads as zeros.
class SparseMemory {
  public:
    static constexpr uint64_t PAGE_BYTES = 1 << 16;

    uint32_t read32(uint64_t index) const {
        const auto& page = pages_[index * 4 / PAGE_BYTES];
        return page ? page[index % (PAGE_BYTES / 4)] : 0;
    }

    void write32(uint64_t index, uint32_t data, uint32_t mask) {
        uint32_t& word = page(index * 4)[index % (PAGE_BYTES / 4)];
        word = (word & ~mask) | (data & mask);
    }

    // Copy LEN bytes in (from DATA) or out (to OUT) at byte ADDR; ADDR + LEN <= MEM_BYTES.
    void copy_in(uint64_t addr, const char* data, uint64_t len) {
        for (uint64_t done = 0; done < len;) {
            uint64_t at = addr + done, n = std::min(len - done, PAGE_BYTES - at % PAGE_BYTES);
            std::memcpy(reinterpret_cast<char*>(page(at)) + at % PAGE_BYTES, data + done, n);
            done += n;
        }
    }

    void copy_out(uint64_t addr, char* out, uint64_t len) const {
        for (uint64_t done = 0; done < len;) {
            uint64_t at = addr + done, n = std::min(len - done, PAGE_BYTES - at % PAGE_BYTES);
            const auto& page = pages_[at / PAGE_BYTES];
            if (page)
                std::memcpy(out + done, reinterpret_cast<const char*>(page.get()) + at % PAGE_BYTES, n);
            else
                std::memset(out + done, 0, n);
            done += n;
        }
    }

  private:
    uint32_t* page(uint64_t addr) {
        auto& page = pages_[addr / PAGE_BYTES];
        if (!page) page.reset(new uint32_t[PAGE_BYTES / 4]());
        return page.get();
    }

    std::vector<std::unique_ptr<uint32_t[]>> pages_ =
        std::vector<std::unique_ptr<uint32_t[]>>((MEM_BYTES + PAGE_BYTES - 1) / PAGE_BYTES);
};

static SparseMemory memory[NODES];

unsigned ace_ram_read32(int node, unsigned index) {
    return uint64_t(index) * 4 < MEM_BYTES ? memory[node].read32(index) : 0;
}

void ace_ram_write32(int node, unsigned index, unsigned data, unsigned strobe) {
    if (uint64_t(index) * 4 >= MEM_BYTES) return;
    uint32_t mask = 0;
    for (int b = 0; b < 4; b++)
        if (strobe >> b & 1) mask |= 0xFFu << (8 * b);
    memory[node].write32(index, data, mask);
}

// One AXI4-Lite access; a read's value goes to *result.
struct Op {
    bool write;
    uint32_t addr, data;
    uint64_t* result;
};

// AXI4-Lite master of one node: one access at a time, AW and W offered together.
struct Master {
    enum State { IDLE, WRITE, WRITE_RESP, READ, READ_DATA } state = IDLE;
    std::deque<Op> queue;
    bool aw_done = false, w_done = false;
    int errors = 0;
    uint32_t error_addr = 0, error_resp = 0;

    bool busy() const { return state != IDLE || !queue.empty(); }

    void drive(AxilIn& in) {
        if (state == IDLE && !queue.empty()) {
            state = queue.front().write ? WRITE : READ;
            aw_done = w_done = false;
        }
        const Op* op = queue.empty() ? nullptr : &queue.front();
        in = AxilIn();
        if (state == WRITE) {
            in.awaddr = op->addr;
            in.wdata = op->data;
            in.awvalid = !aw_done;
            in.wvalid = !w_done;
        } else if (state == WRITE_RESP) {
            in.bready = 1;
        } else if (state == READ) {
            in.araddr = op->addr;
            in.arvalid = 1;
        } else if (state == READ_DATA) {
            in.rready = 1;
        }
    }

    // Called with the outputs seen before the clock edge that takes the handshakes.
    void observe(const AxilIn& in, const AxilOut& out) {
        if (state == WRITE) {
            aw_done |= in.awvalid && out.awready;
            w_done |= in.wvalid && out.wready;
            if (aw_done && w_done) state = WRITE_RESP;
        } else if (state == WRITE_RESP && out.bvalid) {
            finish(out.bresp, 0);
        } else if (state == READ && out.arready) {
            state = READ_DATA;
        } else if (state == READ_DATA && out.rvalid) {
            finish(out.rresp, out.rdata);
        }
    }

    void finish(uint32_t resp, uint32_t value) {
        Op op = queue.front();
        queue.pop_front();
        if (op.result) *op.result = value;
        if (resp && !errors++) {
            error_addr = op.addr;
            error_resp = resp;
        }
        state = IDLE;
    }
};

static void axil_set(Vengine* e, const AxilIn& v) {
    e->s_axil___05Fawaddr = v.awaddr;
    e->s_axil___05Fawvalid = v.awvalid;
    e->s_axil___05Fwdata = v.wdata;
    e->s_axil___05Fwvalid = v.wvalid;
    e->s_axil___05Fbready = v.bready;
    e->s_axil___05Faraddr = v.araddr;
    e->s_axil___05Farvalid = v.arvalid;
    e->s_axil___05Frready = v.rready;
    e->s_axil___05Fwstrb = 0xF;
    e->s_axil___05Fawprot = 0;
    e->s_axil___05Farprot = 0;
}

static void axil_get(const Vengine* e, AxilOut& v) {
    v.awready = e->s_axil___05Fawready;
    v.wready = e->s_axil___05Fwready;
    v.bvalid = e->s_axil___05Fbvalid;
    v.bresp = e->s_axil___05Fbresp;
    v.arready = e->s_axil___05Farready;
    v.rvalid = e->s_axil___05Frvalid;
    v.rdata = e->s_axil___05Frdata;
    v.rresp = e->s_axil___05Frresp;
}

static std::unique_ptr<VerilatedContext> context;
static std::unique_ptr<Vtop> top;  // the fabric
static Vengine* engines[NODES];
static Master masters[NODES];
static AxilIn axil_in[NODES];
static uint64_t cycle = 0;
#if VM_TRACE
static std::unique_ptr<VerilatedFstC> waves;
#endif

// The engines' and the fabric's inputs settled for the coming edge (see the header). One pass:
// the engines' outputs are final after the rising edge (no engine output depends
// combinationally on an input or on a register of the falling edge; checked by
// tests/test_engine_sim_wrapper.py), so the fabric's are after one evaluation with them.
static void settle() {
    to_fabric(top.get(), engines);
    top->clk = 0;
    top->eval();
    to_engines(top.get(), engines);
    for (auto* e : engines) {
        e->clk = 0;
        e->eval();
    }
}

static void tick() {
    for (int n = 0; n < NODES; n++) {
        masters[n].drive(axil_in[n]);
        axil_set(engines[n], axil_in[n]);
    }
    settle();
#if VM_TRACE
    if (waves) waves->dump(1000 * cycle);  // ps
#endif
    for (int n = 0; n < NODES; n++) {
        AxilOut out;
        axil_get(engines[n], out);
        masters[n].observe(axil_in[n], out);
    }
    // The rising edge. The fabric keeps the engines' outputs of before the edge (copied by
    // settle), so the order of the models does not matter.
    for (auto* e : engines) {
        e->clk = 1;
        e->eval();
    }
    top->clk = 1;
    top->eval();
#if VM_TRACE
    if (waves) waves->dump(1000 * cycle + 500);
#endif
    cycle++;
}

// Reset for N >= 1 cycles. An engine registers its reset input (system.py,
// engine_sim_verilog), so it is lowered one cycle before the fabric's: the engines and the
// fabric leave reset on the same edge.
static void reset(uint64_t n) {
    top->rst = 1;
    for (uint64_t i = 0; i < n; i++) {
        for (auto* e : engines) e->rst = i + 1 < n;
        tick();
    }
    top->rst = 0;
    tick();
}

static bool any_master_busy() {
    for (auto& m : masters)
        if (m.busy()) return true;
    return false;
}

static bool all_irq() {
    for (auto* e : engines)
        if (!e->irq) return false;
    return true;
}

static void reply(const std::string& text) {
    std::cout << text << '\n';
    std::cout.flush();
}

static std::string master_errors() {
    std::ostringstream os;
    for (int n = 0; n < NODES; n++) {
        if (masters[n].errors) {
            os << "node " << n << ": AXI4-Lite response " << masters[n].error_resp
               << " at CSR 0x" << std::hex << masters[n].error_addr << std::dec << " ("
               << masters[n].errors << " error responses) ";
            masters[n].errors = 0;
        }
    }
    return os.str();
}

static void cmd_csr(std::istringstream& args) {
    size_t count = 0;
    args >> count;
    std::vector<uint64_t> reads;
    reads.reserve(count);
    std::vector<std::pair<int, Op>> ops;
    std::string bad;  // the first bad line; the batch's other lines are read all the same
    for (size_t i = 0; i < count; i++) {
        std::string line;
        if (!std::getline(std::cin, line)) {
            bad = "the batch ends after " + std::to_string(i) + " of " + std::to_string(count) +
                  " lines";
            break;
        }
        std::istringstream in(line);
        int node = -1;
        char kind = 0;
        uint64_t addr = 0, data = 0;
        in >> node >> kind >> addr;
        if (kind == 'w') in >> data;
        if (!in || node < 0 || node >= NODES || (kind != 'w' && kind != 'r')) {
            if (bad.empty()) bad = "bad csr line " + std::to_string(i + 1) + ": " + line;
            continue;
        }
        if (kind == 'r') reads.push_back(0);
        ops.push_back({node, Op{kind == 'w', uint32_t(addr), uint32_t(data), nullptr}});
    }
    if (!bad.empty()) {
        reply("err " + bad);
        return;
    }
    size_t r = 0;
    for (auto& [node, op] : ops) {
        if (!op.write) op.result = &reads[r++];
        masters[node].queue.push_back(op);
    }
    while (any_master_busy()) tick();
    std::string errors = master_errors();
    if (!errors.empty()) {
        reply("err " + errors);
        return;
    }
    std::ostringstream os;
    os << "ok " << cycle;
    for (auto v : reads) os << ' ' << v;
    reply(os.str());
}

static void cmd_run(std::istringstream& args) {
    uint64_t timeout = 0, interval = 0;
    size_t nreg = 0;
    args >> timeout >> interval >> nreg;
    std::vector<uint32_t> regs(nreg);
    for (auto& reg : regs) args >> reg;
    if (interval == 0) interval = 1;
    struct Sample {
        uint64_t cycle;
        std::vector<uint64_t> values;
    };
    std::deque<Sample> samples;  // deque: values stay put while reads complete
    auto take = [&]() {
        Sample s{cycle, {}};
        for (int n = 0; n < NODES; n++) s.values.push_back(mem_read_bytes(top.get(), n));
        for (int n = 0; n < NODES; n++) s.values.push_back(mem_write_bytes(top.get(), n));
        for (int i = 0; i < LINKS; i++) s.values.push_back(link_bytes(top.get(), i));
        s.values.resize(s.values.size() + NODES * nreg);
        samples.push_back(std::move(s));
        uint64_t* slot = samples.back().values.data() + 2 * NODES + LINKS;
        for (int n = 0; n < NODES; n++)
            for (size_t k = 0; k < nreg; k++)
                masters[n].queue.push_back(Op{false, regs[k], 0, slot++});
    };
    uint64_t start = cycle;
    bool done = false;
    take();
    for (int i = 0; i < 2; i++) tick();  // DONE of the previous run has dropped
    while (cycle - start < timeout) {
        if ((cycle - start) % interval == 0) take();
        tick();
        if (all_irq() && !any_master_busy()) {
            done = true;
            break;
        }
    }
    take();
    while (any_master_busy()) tick();
    std::ostringstream os;
    os << "samples " << samples.size() << '\n';
    for (auto& s : samples) {
        os << s.cycle;
        for (auto v : s.values) os << ' ' << v;
        os << '\n';
    }
    os << "ok " << cycle << (done ? " done" : " timeout");
    std::string errors = master_errors();
    reply(errors.empty() ? os.str() : "err " + errors);
}

int main(int argc, char** argv) {
    context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
#if VM_TRACE
    context->traceEverOn(true);  // before time 0, as Verilator requires
#endif
    top = std::make_unique<Vtop>(context.get(), "TOP");
    for (int n = 0; n < NODES; n++)
        engines[n] = new Vengine(context.get(), ("TOP.engine" + std::to_string(n)).c_str());
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream args(line);
        std::string cmd;
        args >> cmd;
        if (cmd == "quit") {
            break;
        } else if (cmd == "reset") {
            uint64_t n = 0;
            args >> n;
            if (n < 1) {
                reply("err reset needs at least one cycle: " + line);
                continue;
            }
            reset(n);
            reply("ok " + std::to_string(cycle));
        } else if (cmd == "rates") {
            uint32_t mem_q8, bg_q16, mem_lat, link_q8, link_lat;
            args >> mem_q8 >> bg_q16 >> mem_lat >> link_q8 >> link_lat;
            set_rates(top.get(), mem_q8, bg_q16, mem_lat, link_q8, link_lat);
            reply("ok");
        } else if (cmd == "load" || cmd == "dump") {
            int node = -1;
            uint64_t addr = 0, len = 0;
            std::string path;
            args >> node >> addr;
            if (cmd == "dump") args >> len;
            args >> path;
            if (!args || node < 0 || node >= NODES || addr % 4) {
                reply("err bad " + cmd + " command: " + line);
                continue;
            }
            if (cmd == "load") {
                std::ifstream f(path, std::ios::binary);
                std::vector<char> data((std::istreambuf_iterator<char>(f)), {});
                if (!f.good() && !f.eof()) { reply("err cannot read " + path); continue; }
                len = data.size();
                if (addr + len > MEM_BYTES) { reply("err load past the memory end"); continue; }
                memory[node].copy_in(addr, data.data(), len);
            } else {
                if (addr + len > MEM_BYTES) { reply("err dump past the memory end"); continue; }
                std::vector<char> data(len);
                memory[node].copy_out(addr, data.data(), len);
                std::ofstream f(path, std::ios::binary);
                f.write(data.data(), len);
                if (!f) { reply("err cannot write " + path); continue; }
            }
            reply("ok");
        } else if (cmd == "csr") {
            cmd_csr(args);
        } else if (cmd == "run") {
            cmd_run(args);
        } else if (cmd == "waves") {
#if VM_TRACE
            std::string path;
            args >> path;
            waves = std::make_unique<VerilatedFstC>();
            top->trace(waves.get(), 99);
            for (auto* e : engines) e->trace(waves.get(), 99);
            waves->open(path.c_str());
            reply("ok");
#else
            reply("err this build has no waveform support; rebuild with waves");
#endif
        } else if (cmd == "cycle") {
            reply("ok " + std::to_string(cycle));
        } else {
            reply("err unknown command: " + line);
        }
    }
#if VM_TRACE
    if (waves) waves->close();
#endif
    top->final();
    for (auto* e : engines) e->final();
    // Leave without running destructors (nothing left to flush).
    std::cout.flush();
#ifdef ACE_PGO_GENERATE
    __gcov_dump();
#endif
    std::_Exit(0);
}
