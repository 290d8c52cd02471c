// udtperf: a minimal UDT4 (reference library, Debian libudt-dev) peer, for side-by-side
// measurements and for ctp's wire-interoperability tests.
//
//   udtperf [OPTIONS] recv PORT [OUT]         accept one connection (or rendezvous), read until
//                                             the peer closes; write the bytes to OUT if given
//   udtperf [OPTIONS] send HOST PORT SRC      connect and send SRC: a byte count (zeros) or
//                                             the path of a file to send
// OPTIONS:
//   -d          datagram (message) mode: SOCK_DGRAM, sendmsg/recvmsg, in-order, no TTL
//   -m SIZE     message size in datagram mode (default 1000)
//   -z PEERPORT rendezvous: both sides bind (recv: PORT; send: -b) and connect to each other;
//               recv connects to 127.0.0.1:PEERPORT, send binds to PEERPORT
//   -b PORT     local port for `send` (default: any)
// Prints one line: "bytes=N seconds=S mbps=M" (messages=K in datagram mode). A receiver
// stopped by SIGTERM or SIGINT prints the line for what it received so far (`ctp bench`
// caps runs in time this way).
#include <udt/udt.h>
#include "udt_common.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <csignal>
#include <set>
#include <vector>

static volatile std::sig_atomic_t stop_requested = 0;
static void request_stop(int) { stop_requested = 1; }

static int fail(const char* what) { return fail("udtperf", what); }

static sockaddr_in addr_of(const char* host, int port) { return addr_of("udtperf", host, port); }

int main(int argc, char** argv) {
    bool dgram = false;
    int msg_size = 1000, rendezvous_port = 0, bind_port = 0;
    int opt;
    while ((opt = getopt(argc, argv, "+dm:z:b:")) != -1) {
        switch (opt) {
            case 'd': dgram = true; break;
            case 'm': msg_size = std::atoi(optarg); break;
            case 'z': rendezvous_port = std::atoi(optarg); break;
            case 'b': bind_port = std::atoi(optarg); break;
            default: return 2;
        }
    }
    argc -= optind;
    argv += optind;
    if (argc < 2 || (std::strcmp(argv[0], "send") == 0 && argc < 4)) {
        std::fprintf(stderr,
                     "usage: udtperf [-d] [-m SIZE] [-z PEERPORT] [-b PORT] recv PORT [OUT] | "
                     "send HOST PORT BYTES|FILE\n");
        return 2;
    }
    UDT::startup();
    bool recv_mode = std::strcmp(argv[0], "recv") == 0;
    UDTSOCKET s = UDT::socket(AF_INET, dgram ? SOCK_DGRAM : SOCK_STREAM, 0);
    if (rendezvous_port != 0) {
        bool yes = true;
        UDT::setsockopt(s, 0, UDT_RENDEZVOUS, &yes, sizeof(yes));
    }
    std::vector<char> buf(1 << 20);
    auto t0 = std::chrono::steady_clock::now();
    long long total = 0, messages = 0;
    if (recv_mode) {
        FILE* out = argc >= 3 ? std::fopen(argv[2], "wb") : nullptr;
        if (argc >= 3 && out == nullptr) {
            std::perror("udtperf: open output");
            return 1;
        }
        sockaddr_in local = addr_of(nullptr, std::atoi(argv[1]));
        if (UDT::bind(s, (sockaddr*)&local, sizeof(local)) == UDT::ERROR) return fail("bind");
        UDTSOCKET c = s;
        if (rendezvous_port != 0) {
            sockaddr_in peer = addr_of("127.0.0.1", rendezvous_port);
            if (UDT::connect(s, (sockaddr*)&peer, sizeof(peer)) == UDT::ERROR)
                return fail("connect");
        } else {
            if (UDT::listen(s, 1) == UDT::ERROR) return fail("listen");
            sockaddr_storage peer;
            int len = sizeof(peer);
            c = UDT::accept(s, (sockaddr*)&peer, &len);
            if (c == UDT::INVALID_SOCK) return fail("accept");
        }
        t0 = std::chrono::steady_clock::now();
        // Wake every 200 ms to notice a stop request.
        std::signal(SIGTERM, request_stop);
        std::signal(SIGINT, request_stop);
        int timeout_ms = 200;
        UDT::setsockopt(c, 0, UDT_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
        // Datagram mode reads without blocking and waits in epoll: UDT 4.11's blocking
        // recvmsg throws away a message it has just read when the peer's SHUTDOWN arrives
        // during the wait (core.cpp: the broken check after readMsg). The non-blocking path
        // checks "broken" before reading, and after SHUTDOWN it still hands out the
        // buffered messages until none is left.
        int eid = -1;
        if (dgram) {
            bool nonblocking = false;
            UDT::setsockopt(c, 0, UDT_RCVSYN, &nonblocking, sizeof(nonblocking));
            eid = UDT::epoll_create();
            int events = UDT_EPOLL_IN | UDT_EPOLL_ERR;
            if (eid < 0 || UDT::epoll_add_usock(eid, c, &events) == UDT::ERROR)
                return fail("epoll");
        }
        while (!stop_requested) {
            int n = dgram ? UDT::recvmsg(c, buf.data(), (int)buf.size())
                          : UDT::recv(c, buf.data(), (int)buf.size(), 0);
            if (n == UDT::ERROR && UDT::getlasterror_code() == UDT::ERRORINFO::ETIMEOUT) continue;
            if (dgram && n == UDT::ERROR &&
                UDT::getlasterror_code() == UDT::ERRORINFO::EASYNCRCV) {
                std::set<UDTSOCKET> ready;
                UDT::epoll_wait(eid, &ready, nullptr, timeout_ms);
                continue;
            }
            if (n == UDT::ERROR || n == 0) break;
            total += n;
            messages += 1;
            if (out != nullptr && std::fwrite(buf.data(), 1, n, out) != (size_t)n) {
                std::perror("udtperf: write");
                return 1;
            }
        }
        if (eid >= 0) UDT::epoll_release(eid);
        if (out != nullptr) std::fclose(out);
        if (c != s) UDT::close(c);
    } else {
        FILE* in = nullptr;
        long long want = 0;
        char* end = nullptr;
        want = std::strtoll(argv[3], &end, 10);
        if (*end != '\0') {
            in = std::fopen(argv[3], "rb");
            if (in == nullptr) {
                std::perror("udtperf: open input");
                return 1;
            }
            want = -1;
        }
        if (bind_port != 0 || rendezvous_port != 0) {
            sockaddr_in local = addr_of(nullptr, bind_port != 0 ? bind_port : rendezvous_port);
            if (UDT::bind(s, (sockaddr*)&local, sizeof(local)) == UDT::ERROR) return fail("bind");
        }
        sockaddr_in peer = addr_of(argv[1], std::atoi(argv[2]));
        if (UDT::connect(s, (sockaddr*)&peer, sizeof(peer)) == UDT::ERROR) return fail("connect");
        t0 = std::chrono::steady_clock::now();
        int unit = dgram ? msg_size : (int)buf.size();
        for (;;) {
            int chunk;
            if (in != nullptr) {
                chunk = (int)std::fread(buf.data(), 1, unit, in);
                if (chunk <= 0) break;
            } else {
                if (total >= want) break;
                chunk = (int)std::min<long long>((long long)unit, want - total);
            }
            int sent = 0;
            while (sent < chunk) {
                int n = dgram ? UDT::sendmsg(s, buf.data() + sent, chunk - sent, -1, true)
                              : UDT::send(s, buf.data() + sent, chunk - sent, 0);
                if (n == UDT::ERROR) return fail("send");
                sent += n;
            }
            total += chunk;
            messages += 1;
        }
        if (in != nullptr) std::fclose(in);
        // UDT::close lingers until the send buffer is drained.
    }
    UDT::close(s);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dgram)
        std::printf("bytes=%lld messages=%lld seconds=%.3f mbps=%.1f\n", total, messages, secs,
                    total * 8.0 / secs / 1e6);
    else
        std::printf("bytes=%lld seconds=%.3f mbps=%.1f\n", total, secs, total * 8.0 / secs / 1e6);
    UDT::cleanup();
    return 0;
}
