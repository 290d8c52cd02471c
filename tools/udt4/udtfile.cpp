// udtfile: a UDT4 (reference library, Debian libudt-dev) file transfer with the library's own
// file API, UDT::sendfile2 / UDT::recvfile2 (what UDT4's example sendfile/recvfile apps use),
// for `ctp bench --ctp-files`.
//
//   udtfile recv PORT OUT         accept one connection, read the file's size (8 bytes, big
//                                 endian), then recvfile2 that many bytes into OUT
//   udtfile send HOST PORT FILE   connect, send FILE's size, then sendfile2 the file
//
// The receiver prints one line once OUT is complete: "bytes=N seconds=S mbps=M" (seconds from
// the accepted connection to the file written). The sender exits once UDT::close has drained
// its buffer. Either exits non-zero, with a message on stderr, on any error or short transfer.
#include <udt/udt.h>
#include "udt_common.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/stat.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static int fail(const char* what) { return fail("udtfile", what); }

static sockaddr_in addr_of(const char* host, int port) { return addr_of("udtfile", host, port); }

// Sends or receives exactly 8 bytes: the file's size, big endian.
static bool send_size(UDTSOCKET s, int64_t size) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)size >> (56 - 8 * i));
    for (int sent = 0; sent < 8;) {
        int n = UDT::send(s, (char*)b + sent, 8 - sent, 0);
        if (n == UDT::ERROR) return false;
        sent += n;
    }
    return true;
}

static bool recv_size(UDTSOCKET s, int64_t* size) {
    unsigned char b[8];
    for (int got = 0; got < 8;) {
        int n = UDT::recv(s, (char*)b + got, 8 - got, 0);
        if (n == UDT::ERROR || n == 0) return false;
        got += n;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | b[i];
    *size = (int64_t)v;
    return true;
}

int main(int argc, char** argv) {
    bool recv_mode = argc == 4 && std::strcmp(argv[1], "recv") == 0;
    bool send_mode = argc == 5 && std::strcmp(argv[1], "send") == 0;
    if (!recv_mode && !send_mode) {
        std::fprintf(stderr, "usage: udtfile recv PORT OUT | send HOST PORT FILE\n");
        return 2;
    }
    UDT::startup();
    UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
    int64_t offset = 0, size = 0, moved = 0;
    auto t0 = std::chrono::steady_clock::now();
    if (recv_mode) {
        sockaddr_in local = addr_of(nullptr, std::atoi(argv[2]));
        if (UDT::bind(s, (sockaddr*)&local, sizeof(local)) == UDT::ERROR) return fail("bind");
        if (UDT::listen(s, 1) == UDT::ERROR) return fail("listen");
        sockaddr_storage peer;
        int len = sizeof(peer);
        UDTSOCKET c = UDT::accept(s, (sockaddr*)&peer, &len);
        if (c == UDT::INVALID_SOCK) return fail("accept");
        t0 = std::chrono::steady_clock::now();
        if (!recv_size(c, &size)) return fail("reading the file size");
        moved = UDT::recvfile2(c, argv[3], &offset, size);
        if (moved == UDT::ERROR) return fail("recvfile2");
        UDT::close(c);
    } else {
        struct stat st;
        if (stat(argv[4], &st) != 0) {
            std::perror("udtfile: stat input");
            return 1;
        }
        size = (int64_t)st.st_size;
        sockaddr_in peer = addr_of(argv[2], std::atoi(argv[3]));
        if (UDT::connect(s, (sockaddr*)&peer, sizeof(peer)) == UDT::ERROR) return fail("connect");
        t0 = std::chrono::steady_clock::now();
        if (!send_size(s, size)) return fail("sending the file size");
        moved = UDT::sendfile2(s, argv[4], &offset, size);
        if (moved == UDT::ERROR) return fail("sendfile2");
        // UDT::close lingers until the send buffer is drained.
    }
    UDT::close(s);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (moved != size) {
        std::fprintf(stderr, "udtfile: moved %lld of %lld bytes\n", (long long)moved,
                     (long long)size);
        return 1;
    }
    if (recv_mode)
        std::printf("bytes=%lld seconds=%.3f mbps=%.1f\n", (long long)moved, secs,
                    moved * 8.0 / secs / 1e6);
    UDT::cleanup();
    return 0;
}
