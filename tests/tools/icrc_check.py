#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the ICRC of every RoCEv2 packet in a pcap capture.

    icrc_check.py [-v] [--max-errors N] CAPTURE.pcap

Reads a classic pcap file (either byte order, micro- or nanosecond
timestamps; link types Ethernet with optional 802.1Q tags, Linux cooked
capture v1/v2 and raw IP), takes every IPv4 or IPv6 UDP datagram to port
4791 as a RoCEv2 packet, recomputes its ICRC and compares it with the
packet's last four bytes.

The ICRC follows IBTA RoCEv2 Annex A17 (A17.4.4 "ICRC"): a CRC-32 (the
Ethernet polynomial, zlib.crc32, which includes the final inversion) over

    8 bytes of 0xff standing in for the LRH
    || the IP header with its variant fields set to all ones:
         IPv4: type of service (DSCP, ECN), time to live, header checksum
         IPv6: traffic class, flow label, hop limit
    || the UDP header with its checksum set to all ones
    || the BTH with its resv8a byte (FECN/BECN) set to all ones
    || the rest of the UDP payload, up to and not including the ICRC,

carried on the wire least significant byte first.  The masked headers are
built from the captured bytes here, independently of any driver's code.

Prints a summary (packets, ICRC valid/invalid, packets per opcode) and a
line per failure; exits 0 only when at least one RoCEv2 packet was found
and every one of them carries a valid ICRC (1 otherwise, 2 when the file
cannot be read).  Standard library only.
"""
import argparse
import collections
import struct
import sys
import zlib

ROCE_PORT = 4791

# Link types of the pcap header (www.tcpdump.org/linktypes.html).
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
VLAN_TYPES = (0x8100, 0x88A8, 0x9100)

# The operation of an IBA opcode (its low five bits) and the transport
# service (its top three bits), IBTA volume 1, table 38.
OPERATIONS = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST",
    0x03: "SEND_LAST_WITH_IMMEDIATE", 0x04: "SEND_ONLY",
    0x05: "SEND_ONLY_WITH_IMMEDIATE", 0x06: "RDMA_WRITE_FIRST",
    0x07: "RDMA_WRITE_MIDDLE", 0x08: "RDMA_WRITE_LAST",
    0x09: "RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0A: "RDMA_WRITE_ONLY",
    0x0B: "RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0C: "RDMA_READ_REQUEST",
    0x0D: "RDMA_READ_RESPONSE_FIRST", 0x0E: "RDMA_READ_RESPONSE_MIDDLE",
    0x0F: "RDMA_READ_RESPONSE_LAST", 0x10: "RDMA_READ_RESPONSE_ONLY",
    0x11: "ACKNOWLEDGE", 0x12: "ATOMIC_ACKNOWLEDGE",
    0x13: "COMPARE_SWAP", 0x14: "FETCH_ADD", 0x16: "SEND_LAST_WITH_INVALIDATE",
    0x17: "SEND_ONLY_WITH_INVALIDATE", 0x1C: "FLUSH", 0x1D: "ATOMIC_WRITE",
}
SERVICES = {0: "RC", 1: "UC", 2: "RD", 3: "UD", 5: "XRC"}


def opcode_name(op):
    if op == 0x81:
        return "CNP"
    svc = SERVICES.get(op >> 5)
    name = OPERATIONS.get(op & 0x1F)
    if svc is None or name is None:
        return "opcode_0x%02x" % op
    return "%s_%s" % (svc, name)


class PcapError(Exception):
    pass


def read_pcap(f):
    """Yield (frame number, link type, captured bytes, original length)."""
    head = f.read(24)
    if len(head) < 24:
        raise PcapError("too short for a pcap file header")
    magic = head[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    elif magic == b"\x0a\x0d\x0d\x0a":
        raise PcapError("pcapng is not supported; write pcap (tcpdump -w, or editcap -F pcap)")
    else:
        raise PcapError("not a pcap file (magic %s)" % magic.hex())
    _major, _minor, _zone, _sigfigs, _snaplen, network = struct.unpack(
        endian + "HHiIII", head[4:])
    linktype = network & 0x0FFFFFFF
    frame = 0
    while True:
        rec = f.read(16)
        if not rec:
            return
        if len(rec) < 16:
            raise PcapError("truncated record header after frame %d" % frame)
        _sec, _frac, incl, orig = struct.unpack(endian + "IIII", rec)
        data = f.read(incl)
        if len(data) < incl:
            raise PcapError("truncated record data in frame %d" % (frame + 1))
        frame += 1
        yield frame, linktype, data, orig


def network_layer(linktype, frame):
    """(ethertype, offset of the IP header) of a captured frame, or None."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None
        off, etype = 14, struct.unpack_from("!H", frame, 12)[0]
        while etype in VLAN_TYPES and len(frame) >= off + 4:
            etype = struct.unpack_from("!H", frame, off + 2)[0]
            off += 4
        return etype, off
    if linktype == LINKTYPE_LINUX_SLL:
        if len(frame) < 16:
            return None
        return struct.unpack_from("!H", frame, 14)[0], 16
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(frame) < 20:
            return None
        return struct.unpack_from("!H", frame, 0)[0], 20
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        if not frame:
            return None
        version = frame[0] >> 4
        return {4: ETH_P_IP, 6: ETH_P_IPV6}.get(version), 0
    raise PcapError("unsupported link type %d" % linktype)


def masked_ipv4(ip):
    """The IPv4 header with TOS, TTL and header checksum all ones."""
    m = bytearray(ip)
    m[1] = 0xFF
    m[8] = 0xFF
    m[10] = m[11] = 0xFF
    return bytes(m)


def masked_ipv6(ip):
    """The IPv6 header with traffic class, flow label and hop limit all ones."""
    m = bytearray(ip)
    m[0] |= 0x0F
    m[1] = m[2] = m[3] = 0xFF
    m[7] = 0xFF
    return bytes(m)


def icrc_of(masked_ip, udp_header, roce):
    """The ICRC of a RoCEv2 packet, roce being the UDP payload without it."""
    udp = udp_header[:6] + b"\xff\xff"
    bth = roce[:4] + b"\xff" + roce[5:12]
    return zlib.crc32(roce[12:], zlib.crc32(bth, zlib.crc32(
        udp, zlib.crc32(masked_ip, zlib.crc32(b"\xff" * 8)))))


class Result:
    """One RoCEv2 packet: its frame, family, opcode and verdict."""

    def __init__(self, frame, family):
        self.frame, self.family = frame, family
        self.opcode = None
        self.qpn = self.psn = None
        self.error = None
        self.wire = self.computed = None


def check_frame(number, linktype, frame, orig_len):
    """A Result for a frame holding a UDP datagram to 4791, None otherwise."""
    nl = network_layer(linktype, frame)
    if nl is None:
        return None
    etype, off = nl
    if etype == ETH_P_IP:
        if len(frame) < off + 20 or frame[off] >> 4 != 4:
            return None
        ihl = (frame[off] & 0x0F) * 4
        total = struct.unpack_from("!H", frame, off + 2)[0]
        if frame[off + 9] != 17 or len(frame) < off + ihl + 8:
            return None
        ip = frame[off:off + ihl]
        udp_off = off + ihl
        frag = struct.unpack_from("!H", frame, off + 6)[0]
        ip_end = off + total
        family, masked = "ipv4", lambda: masked_ipv4(ip)
        if ihl != 20:
            problem = "IPv4 header with options (%d bytes)" % ihl
        elif frag & 0x3FFF:
            problem = "IPv4 fragment (flags/offset 0x%04x)" % frag
        else:
            problem = None
    elif etype == ETH_P_IPV6:
        if len(frame) < off + 48 or frame[off] >> 4 != 6:
            return None
        # RoCEv2 carries no extension headers: the next header is UDP.
        if frame[off + 6] != 17:
            return None
        ip = frame[off:off + 40]
        udp_off = off + 40
        ip_end = udp_off + struct.unpack_from("!H", frame, off + 4)[0]
        family, masked = "ipv6", lambda: masked_ipv6(ip)
        problem = None
    else:
        return None
    _sport, dport, ulen, _csum = struct.unpack_from("!HHHH", frame, udp_off)
    if dport != ROCE_PORT:
        return None
    r = Result(number, family)
    if len(frame) < orig_len:
        r.error = "frame truncated by the capture (%d of %d bytes)" % (len(frame), orig_len)
        return r
    if problem:
        r.error = problem
        return r
    if ulen < 8 or udp_off + ulen > ip_end or udp_off + ulen > len(frame):
        r.error = "UDP length %d does not fit the IP packet" % ulen
        return r
    payload = frame[udp_off + 8:udp_off + ulen]
    if len(payload) < 12 + 4:
        r.error = "UDP payload of %d bytes is too short for BTH and ICRC" % len(payload)
        return r
    r.opcode = payload[0]
    r.qpn = struct.unpack_from("!I", payload, 4)[0] & 0xFFFFFF
    r.psn = struct.unpack_from("!I", payload, 8)[0] & 0xFFFFFF
    roce, icrc = payload[:-4], payload[-4:]
    r.wire = struct.unpack("<I", icrc)[0]
    r.computed = icrc_of(masked(), frame[udp_off:udp_off + 8], roce)
    if r.wire != r.computed:
        r.error = "ICRC 0x%08x on the wire, 0x%08x computed" % (r.wire, r.computed)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print a line per RoCEv2 packet")
    ap.add_argument("--max-errors", type=int, default=20,
                    help="failures printed in full (default 20)")
    args = ap.parse_args(argv)

    frames = 0
    results = []
    try:
        with open(args.pcap, "rb") as f:
            for number, linktype, data, orig in read_pcap(f):
                frames += 1
                r = check_frame(number, linktype, data, orig)
                if r is None:
                    continue
                results.append(r)
                if args.verbose:
                    print("frame %d %s %s qpn 0x%06x psn %d: %s" % (
                        r.frame, r.family,
                        opcode_name(r.opcode) if r.opcode is not None else "-",
                        r.qpn or 0, r.psn or 0, r.error or "ICRC ok"))
    except (OSError, PcapError) as e:
        print("icrc_check: %s: %s" % (args.pcap, e), file=sys.stderr)
        return 2

    bad = [r for r in results if r.error]
    by_family = collections.Counter(r.family for r in results)
    by_opcode = collections.Counter(
        opcode_name(r.opcode) for r in results if r.opcode is not None)
    print("icrc_check: %s: %d frames, %d RoCEv2 packets (%s), %d ICRC valid, %d invalid"
          % (args.pcap, frames, len(results),
             ", ".join("%s %d" % kv for kv in sorted(by_family.items())) or "none",
             len(results) - len(bad), len(bad)))
    for name, n in sorted(by_opcode.items(), key=lambda kv: (-kv[1], kv[0])):
        print("    %-40s %d" % (name, n))
    for r in bad[:args.max_errors]:
        print("FAIL frame %d (%s%s): %s" % (
            r.frame, r.family,
            ", %s qpn 0x%06x psn %d" % (opcode_name(r.opcode), r.qpn, r.psn)
            if r.opcode is not None else "", r.error))
    if len(bad) > args.max_errors:
        print("FAIL ... and %d more" % (len(bad) - args.max_errors))
    if not results:
        print("FAIL no RoCEv2 packets (UDP port %d) in the capture" % ROCE_PORT)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
