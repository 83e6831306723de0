// ACE harness driver: runs a Verilated ACE system (sim_harness/system.py, host="driver") with no
// Python on the per-cycle path. sim_harness/simulator.py builds it together with a generated
// system_ports.h (node count, port accessors) and talks to it over stdin/stdout, one command per
// line, one reply line per command ("ok ..." or "err <message>"):
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
// load and dump take no simulated cycles. An AXI4-Lite SLVERR/DECERR makes a csr reply "err".
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

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

#include "system_ports.h"  // NODES, MEM_BYTES, LINKS, LINK_NODE[], LINK_INDEX[], accessors

static std::vector<std::vector<uint32_t>> memory(NODES, std::vector<uint32_t>(MEM_BYTES / 4));

unsigned ace_ram_read32(int node, unsigned index) {
    return index < memory[node].size() ? memory[node][index] : 0;
}

void ace_ram_write32(int node, unsigned index, unsigned data, unsigned strobe) {
    if (index >= memory[node].size()) return;
    uint32_t mask = 0;
    for (int b = 0; b < 4; b++)
        if (strobe >> b & 1) mask |= 0xFFu << (8 * b);
    memory[node][index] = (memory[node][index] & ~mask) | (data & mask);
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

static std::unique_ptr<Vtop> top;
static Master masters[NODES];
static AxilIn axil_in[NODES];
static uint64_t cycle = 0;
#if VM_TRACE
static std::unique_ptr<VerilatedFstC> waves;
#endif

static void tick() {
    for (int n = 0; n < NODES; n++) {
        masters[n].drive(axil_in[n]);
        axil_set(top.get(), n, axil_in[n]);
    }
    top->clk = 0;
    top->eval();
#if VM_TRACE
    if (waves) waves->dump(1000 * cycle);  // ps
#endif
    for (int n = 0; n < NODES; n++) {
        AxilOut out;
        axil_get(top.get(), n, out);
        masters[n].observe(axil_in[n], out);
    }
    top->clk = 1;
    top->eval();
#if VM_TRACE
    if (waves) waves->dump(1000 * cycle + 500);
#endif
    cycle++;
}

static bool any_master_busy() {
    for (auto& m : masters)
        if (m.busy()) return true;
    return false;
}

static bool all_irq() {
    for (int n = 0; n < NODES; n++)
        if (!irq(top.get(), n)) return false;
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
    for (size_t i = 0; i < count; i++) {
        std::string line;
        std::getline(std::cin, line);
        std::istringstream in(line);
        int node;
        char kind;
        uint64_t addr = 0, data = 0;
        in >> node >> kind >> addr;
        if (kind == 'w') in >> data;
        if (!in || node < 0 || node >= NODES) {
            reply("err bad csr line: " + line);
            return;
        }
        if (kind == 'r') reads.push_back(0);
        ops.push_back({node, Op{kind == 'w', uint32_t(addr), uint32_t(data), nullptr}});
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
    Verilated::commandArgs(argc, argv);
#if VM_TRACE
    Verilated::traceEverOn(true);  // before time 0, as Verilator requires
#endif
    top = std::make_unique<Vtop>();
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
            top->rst = 1;
            for (uint64_t i = 0; i < n; i++) tick();
            top->rst = 0;
            tick();
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
            uint8_t* bytes = reinterpret_cast<uint8_t*>(memory[node].data());
            if (cmd == "load") {
                std::ifstream f(path, std::ios::binary);
                std::vector<char> data((std::istreambuf_iterator<char>(f)), {});
                if (!f.good() && !f.eof()) { reply("err cannot read " + path); continue; }
                len = data.size();
                if (addr + len > MEM_BYTES) { reply("err load past the memory end"); continue; }
                std::copy(data.begin(), data.end(), bytes + addr);
            } else {
                if (addr + len > MEM_BYTES) { reply("err dump past the memory end"); continue; }
                std::ofstream f(path, std::ios::binary);
                f.write(reinterpret_cast<char*>(bytes + addr), len);
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
            // The engines are hierarchical blocks, created by the first evaluation (an
            // initial block of their wrappers); traced before that, their scopes stay empty.
            top->eval();
            waves = std::make_unique<VerilatedFstC>();
            top->trace(waves.get(), 99);
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
    // Leave without running destructors: the hierarchical model's teardown can block.
    std::cout.flush();
    std::_Exit(0);
}
