#!/usr/bin/env python3
"""pcap2hex: print the UDP payloads of a pcap (Ethernet or Linux cooked, IPv4) as hex lines.

Usage: pcap2hex.py CAPTURE.pcap > vectors.hex
Each line is "SRCPORT>DSTPORT HEX". Lines starting with '#' are comments.
"""
import struct
import sys


def main(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1:  # Ethernet
            if struct.unpack(">H", frame[12:14])[0] != 0x0800:
                continue
            ip = frame[14:]
        elif linktype == 113:  # Linux cooked
            ip = frame[16:]
        else:
            ip = frame
        if ip[0] >> 4 != 4 or ip[9] != 17:
            continue
        ihl = (ip[0] & 15) * 4
        total = struct.unpack(">H", ip[2:4])[0]
        udp = ip[ihl:total]
        sport, dport, ulen = struct.unpack(">HHH", udp[:6])
        print(f"{sport}>{dport} {udp[8:ulen].hex()}")


if __name__ == "__main__":
    main(sys.argv[1])
