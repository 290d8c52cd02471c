// udtperf: a minimal UDT4 (reference library, Debian libudt-dev) throughput peer.
//   udtperf recv PORT            accept one connection, count bytes until the peer closes
//   udtperf send HOST PORT BYTES connect and send BYTES of zeros
// Prints one line: "bytes=N seconds=S mbps=M". Used for side-by-side measurements and, in
// later issues, for wire interoperability tests. A receiver stopped by SIGTERM or SIGINT
// prints the line for what it received so far (`ctp bench` caps runs in time this way).
#include <udt/udt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <csignal>
#include <vector>

static volatile std::sig_atomic_t stop_requested = 0;
static void request_stop(int) { stop_requested = 1; }

static int fail(const char* what) {
    std::fprintf(stderr, "udtperf: %s: %s\n", what, UDT::getlasterror().getErrorMessage());
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: udtperf recv PORT | udtperf send HOST PORT BYTES\n");
        return 2;
    }
    UDT::startup();
    bool recv_mode = std::strcmp(argv[1], "recv") == 0;
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (recv_mode) hints.ai_flags = AI_PASSIVE;
    const char* host = recv_mode ? nullptr : argv[2];
    const char* port = recv_mode ? argv[2] : argv[3];
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        std::fprintf(stderr, "udtperf: bad address\n");
        return 2;
    }
    UDTSOCKET s = UDT::socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    std::vector<char> buf(1 << 20);
    auto t0 = std::chrono::steady_clock::now();
    long long total = 0;
    if (recv_mode) {
        if (UDT::bind(s, res->ai_addr, res->ai_addrlen) == UDT::ERROR) return fail("bind");
        if (UDT::listen(s, 1) == UDT::ERROR) return fail("listen");
        sockaddr_storage peer;
        int len = sizeof(peer);
        UDTSOCKET c = UDT::accept(s, (sockaddr*)&peer, &len);
        if (c == UDT::INVALID_SOCK) return fail("accept");
        t0 = std::chrono::steady_clock::now();
        // Wake every 200 ms to notice a stop request.
        std::signal(SIGTERM, request_stop);
        std::signal(SIGINT, request_stop);
        int timeout_ms = 200;
        UDT::setsockopt(c, 0, UDT_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
        while (!stop_requested) {
            int n = UDT::recv(c, buf.data(), (int)buf.size(), 0);
            if (n == UDT::ERROR && UDT::getlasterror_code() == UDT::ERRORINFO::ETIMEOUT) continue;
            if (n == UDT::ERROR || n == 0) break;
            total += n;
        }
        UDT::close(c);
    } else {
        long long want = std::atoll(argv[4]);
        if (UDT::connect(s, res->ai_addr, res->ai_addrlen) == UDT::ERROR) return fail("connect");
        t0 = std::chrono::steady_clock::now();
        while (total < want) {
            int chunk = (int)std::min<long long>((long long)buf.size(), want - total);
            int n = UDT::send(s, buf.data(), chunk, 0);
            if (n == UDT::ERROR) return fail("send");
            total += n;
        }
        // Let the library drain its buffer before closing (UDT::close lingers).
    }
    UDT::close(s);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("bytes=%lld seconds=%.3f mbps=%.1f\n", total, secs, total * 8.0 / secs / 1e6);
    freeaddrinfo(res);
    UDT::cleanup();
    return 0;
}
