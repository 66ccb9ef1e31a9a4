#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Generate the RoCEv2 ICRC check vectors hard-coded in
drivers/infiniband/sw/rrxe/proto/icrc.rs (tests `ipv4_vector`, `ipv6_vector`).

Independent of the Rust code: the invariant fields are not patched into a
copy of the packet but the headers are packed a second time with the
variant fields set to all ones, and the CRC is zlib's CRC-32, over

    8 bytes of 0xff (the masked LRH of IBTA Annex A17)
    || masked IP header || masked UDP header || masked BTH
    || the rest of the UDP payload up to, not including, the ICRC.

zlib.crc32() includes the final inversion, so its value is the ICRC; the
wire carries it least significant byte first.  Run: python3 icrc_vectors.py
"""
import struct
import zlib


def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def bth(opcode, se, pad, pkey, resv8a, qpn, ack, psn):
    flags = (0x80 if se else 0) | (pad << 4)
    return struct.pack("!BBHII", opcode, flags, pkey, (resv8a << 24) | qpn,
                       ((0x80 if ack else 0) << 24) | psn)


def ipv4(tos, total, ttl, check, src, dst):
    return struct.pack("!BBHHHBBH4s4s", 0x45, tos, total, 0x1234, 0x4000, ttl,
                       17, check, bytes(src), bytes(dst))


def ipv6(tclass, flow, plen, hop, src, dst):
    word = (6 << 28) | (tclass << 20) | flow
    return struct.pack("!IHBB16s16s", word, plen, 17, hop, bytes(src), bytes(dst))


def udp(sport, length, check):
    return struct.pack("!HHHH", sport, 4791, length, check)


def emit(name, headers, masked, roce_rest):
    icrc = zlib.crc32(b"\xff" * 8 + masked + roce_rest)
    pkt = headers + roce_rest + struct.pack("<I", icrc)
    print("// %s: %d bytes, ICRC %#010x" % (name, len(pkt), icrc))
    for i in range(0, len(pkt), 16):
        print("    " + " ".join("0x%02x," % b for b in pkt[i:i + 16]))


def v4():
    # RC SEND ONLY, 13-byte payload, pad 3, to QPN 0x11, PSN 0x123456,
    # AckReq, DSCP/ECN 0x2e, TTL 64, FECN set in resv8a.
    payload = b"hello, RoCE!\n" + b"\0" * 3
    roce_len = 12 + len(payload) + 4
    total = 20 + 8 + roce_len
    src, dst = [10, 0, 0, 1], [10, 0, 0, 2]
    ip = ipv4(0x2E, total, 64, 0, src, dst)
    ip = ipv4(0x2E, total, 64, csum(ip), src, dst)
    u = udp(0xC011, 8 + roce_len, 0)
    b = bth(0x04, True, 3, 0xFFFF, 0x80, 0x11, True, 0x123456)
    masked = (ipv4(0xFF, total, 0xFF, 0xFFFF, src, dst) + udp(0xC011, 8 + roce_len, 0xFFFF)
              + bth(0x04, True, 3, 0xFFFF, 0xFF, 0x11, True, 0x123456))
    emit("IPv4 RC_SEND_ONLY", ip + u + b, masked, payload)


def v6():
    # UD SEND ONLY WITH IMMEDIATE, DETH Q_Key 0x80010000 SrcQP 1, ImmDt
    # 0xdeadbeef, 6-byte payload (pad 2), traffic class 0xa4, flow label
    # 0x12345, hop limit 64, BECN set, UDP checksum 0x5555.
    src = [0xFE, 0x80] + [0] * 6 + [0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55]
    dst = [0xFE, 0x80] + [0] * 6 + [0x02, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x66]
    deth = struct.pack("!II", 0x80010000, 1)
    imm = bytes([0xDE, 0xAD, 0xBE, 0xEF])
    payload = b"RoCEv2" + b"\0" * 2
    rest = deth + imm + payload
    roce_len = 12 + len(rest) + 4
    ip = ipv6(0xA4, 0x12345, 8 + roce_len, 64, src, dst)
    u = udp(0xD00D, 8 + roce_len, 0x5555)
    b = bth(0x65, False, 2, 0xFFFF, 0x40, 0x000002, False, 0xFFFFFF)
    masked = (ipv6(0xFF, 0xFFFFF, 8 + roce_len, 0xFF, src, dst) + udp(0xD00D, 8 + roce_len, 0xFFFF)
              + bth(0x65, False, 2, 0xFFFF, 0xFF, 0x000002, False, 0xFFFFFF))
    emit("IPv6 UD_SEND_ONLY_WITH_IMMEDIATE", ip + u + b, masked, rest)


v4()
v6()
