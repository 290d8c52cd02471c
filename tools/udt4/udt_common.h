// Helpers the UDT4 peers (udtperf.cpp, udtfile.cpp) share.
#pragma once

#include <udt/udt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Prints `prog: what: UDT's last error` on stderr; returns the exit status 1.
static int fail(const char* prog, const char* what) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, what, UDT::getlasterror().getErrorMessage());
    return 1;
}

// The IPv4 address of `host` (a dotted quad or a name; nullptr: any) and `port`; exits
// with status 2 naming `prog` when the name does not resolve.
static sockaddr_in addr_of(const char* prog, const char* host, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (host == nullptr) {
        a.sin_addr.s_addr = INADDR_ANY;
    } else if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        hostent* h = gethostbyname(host);
        if (h == nullptr) {
            std::fprintf(stderr, "%s: bad host %s\n", prog, host);
            std::exit(2);
        }
        std::memcpy(&a.sin_addr, h->h_addr, 4);
    }
    return a;
}
