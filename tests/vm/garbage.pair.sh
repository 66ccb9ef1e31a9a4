# Bad input on UDP 4791: VM 2 sends thousands of malformed RoCEv2 packets to
# VM 1, one kind at a time, and VM 1 checks after each kind that they were
# dropped and counted (rrxe: exactly, under the rcvd_drop_* counter of the
# reason; rxe: rcvd_pkts does not move), that the device still works, and
# that the UDP sockets follow link delete, link add and module unload.
# The packets are built with raw IPv4 sockets (so that the IP
# identification, which the ICRC covers, is known) and ordinary IPv6 UDP
# sockets (every variant IPv6 field is masked out of the ICRC).
# runs: rrxe@debug
# full-runs: rxe@debug

N=300
HWC=/sys/class/infiniband/$IBDEV/ports/1/hw_counters
MY_IP6=fd00:4791::$VM
PEER_IP6=fd00:4791::$((3 - VM))
ip -6 addr add "$MY_IP6/64" dev eth0 nodad

# The kinds, in the order VM 2 sends them, with the rrxe counter each one
# must move by its packet count ("-" for none: dropped before rrxe).
KINDS="
truncated-bth     rcvd_drop_truncated
empty             rcvd_drop_truncated
short-for-pad     rcvd_drop_bad_length
short-for-reth    rcvd_drop_bad_length
not-aligned       rcvd_drop_bad_length
udp-len-short     rcvd_drop_bad_length
udp-len-long      -
bad-tver          rcvd_drop_bad_tver
unknown-opcode    rcvd_drop_bad_opcode
qpn0              rcvd_drop_bad_qpn
unknown-qpn       rcvd_drop_bad_qpn
bad-icrc          rcvd_drop_bad_icrc
ip-options        rcvd_drop_other
broadcast-dgid    rcvd_drop_bad_dgid
fragmented        rcvd_drop_bad_qpn
v6-unknown-qpn    rcvd_drop_bad_qpn
v6-bad-icrc       rcvd_drop_bad_icrc
"

cat >/tmp/garbage.py <<'EOF'
import socket, struct, sys, time, zlib, random

kind, n, src, dst, src6, dst6 = sys.argv[1], int(sys.argv[2]), *sys.argv[3:7]
rnd = random.Random(4791)
S, D = socket.inet_aton(src), socket.inet_aton(dst)
IPID = 0x4791

def bth(op, qpn, pad=0, tver=0, psn=0):
    return struct.pack("!BBHII", op, (pad << 4) | tver, 0xFFFF, qpn & 0xFFFFFF, psn)

def ipv4(total, dst=D, ihl=5, frag=0x4000, opts=b""):
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, IPID, frag, 64, 17, 0,
                       S, dst) + opts

def icrc(masked_ip, udp, roce):
    # Masked LRH, IP (TOS, TTL, checksum), UDP checksum, BTH resv8a.
    u = udp[:6] + b"\xff\xff"
    b = roce[:4] + b"\xff" + roce[5:12]
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + masked_ip + u + b + roce[12:]))

def mask4(ip):
    return ip[:1] + b"\xff" + ip[2:8] + b"\xff" + ip[9:10] + b"\xff\xff" + ip[12:]

def v4_packet(body, ulen=None, good_icrc=True, dst=D, opts=b"", frag=0x4000):
    """IP + UDP + body + ICRC, the ICRC over the header VM 1 will see."""
    roce_len = len(body) + 4
    ihl = 5 + len(opts) // 4
    total = ihl * 4 + 8 + roce_len
    ip = ipv4(total, dst, ihl, frag, opts)
    udp = struct.pack("!HHHH", 0xC000 | rnd.randrange(0x4000), 4791, 8 + roce_len, 0)
    crc = icrc(mask4(ip), udp, body)
    if not good_icrc:
        crc = bytes(c ^ 0x5A for c in crc)
    if ulen is not None:
        udp = udp[:4] + struct.pack("!H", ulen) + udp[6:]
    return ip, udp + body + crc

def send_only(qpn, payload=b"garbage!", tver=0):
    pad = -len(payload) % 4
    return bth(0x04, qpn, pad, tver, rnd.randrange(1 << 24)) + payload + b"\0" * pad

def unknown_qpn():
    # Never 0 (invalid), 1 (GSI: rxe may own it) or 0xffffff (multicast).
    return rnd.randrange(2, 0xFFFFFF)

raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
raw.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u6.bind((src6, 0xC123))

def send4(ip, rest, dst=dst):
    raw.sendto(ip + rest, (dst, 0))

for i in range(n):
    IPID = 0x4000 + i
    if kind == "truncated-bth":
        ip, rest = v4_packet(b"")
        rest = rest[:8] + bytes(rnd.randrange(256) for _ in range(1 + i % 11))
        rest = rest[:4] + struct.pack("!H", len(rest)) + rest[6:]
        ip = ipv4(len(ip) + len(rest))
        send4(ip, rest)
    elif kind == "empty":
        send4(ipv4(28), struct.pack("!HHHH", 0xC000, 4791, 8, 0))
    elif kind == "short-for-pad":
        # SEND ONLY with pad 3 and no room for it.
        ip, rest = v4_packet(bth(0x04, unknown_qpn(), pad=3))
        send4(ip, rest)
    elif kind == "short-for-reth":
        # RDMA WRITE ONLY needs 28 bytes of headers; give it 16.
        ip, rest = v4_packet(bth(0x0A, unknown_qpn()) + b"\0" * 4)
        send4(ip, rest)
    elif kind == "not-aligned":
        ip, rest = v4_packet(send_only(unknown_qpn()) + b"\0" * (1 + i % 3))
        send4(ip, rest)
    elif kind == "udp-len-short":
        # The UDP length claims 2 bytes less: the UDP layer trims the packet.
        body = send_only(unknown_qpn())
        ip, rest = v4_packet(body, ulen=8 + len(body) + 2)
        send4(ip, rest)
    elif kind == "udp-len-long":
        # The UDP length claims more than the packet: the UDP layer drops it.
        body = send_only(unknown_qpn())
        ip, rest = v4_packet(body, ulen=8 + len(body) + 4 + 64)
        send4(ip, rest)
    elif kind == "bad-tver":
        ip, rest = v4_packet(send_only(unknown_qpn(), tver=1 + i % 15))
        send4(ip, rest)
    elif kind == "unknown-opcode":
        op = [0x15, 0x18, 0x1B, 0x1E, 0x1F, 0x40, 0x44, 0x60, 0x80, 0x81, 0xE0, 0xFF][i % 12]
        ip, rest = v4_packet(bth(op, unknown_qpn()) + b"\0" * 16)
        send4(ip, rest)
    elif kind == "qpn0":
        ip, rest = v4_packet(send_only(0))
        send4(ip, rest)
    elif kind == "unknown-qpn":
        ip, rest = v4_packet(send_only(unknown_qpn(), bytes(rnd.randrange(256) for _ in range(i % 64))))
        send4(ip, rest)
    elif kind == "bad-icrc":
        ip, rest = v4_packet(send_only(unknown_qpn()), good_icrc=False)
        send4(ip, rest)
    elif kind == "ip-options":
        # A valid packet behind an IPv4 header with options (four NOPs),
        # which RoCEv2 does not allow.
        ip, rest = v4_packet(send_only(unknown_qpn()), opts=b"\x01" * 4)
        send4(ip, rest)
    elif kind == "broadcast-dgid":
        bcast = socket.inet_aton(dst.rsplit(".", 1)[0] + ".255")
        ip, rest = v4_packet(send_only(unknown_qpn()), dst=bcast)
        send4(ip, rest, socket.inet_ntoa(bcast))
    elif kind == "fragmented":
        # 3000 bytes of payload in three IP fragments; VM 1 reassembles
        # them (frag_off 0 in the reassembled header, covered by the ICRC).
        payload = bytes(rnd.randrange(256) for _ in range(3000))
        ip, rest = v4_packet(send_only(unknown_qpn(), payload), frag=0)
        for off in range(0, len(rest), 1480):
            part = rest[off:off + 1480]
            more = 0x2000 if off + 1480 < len(rest) else 0
            send4(ipv4(20 + len(part), frag=more | (off // 8)), part)
    elif kind in ("v6-unknown-qpn", "v6-bad-icrc"):
        # Every variant field of the IPv6 header is masked: build the ICRC
        # over the header VM 1 will see.
        body = send_only(unknown_qpn())
        sport = 0xC123
        plen = 8 + len(body) + 4
        ip6 = struct.pack("!IHBB16s16s", 0x6FFFFFFF, plen, 17, 0xFF,
                          socket.inet_pton(socket.AF_INET6, src6),
                          socket.inet_pton(socket.AF_INET6, dst6))
        udp = struct.pack("!HHHH", sport, 4791, plen, 0)
        crc = icrc(ip6, udp, body)
        if kind == "v6-bad-icrc":
            crc = crc[::-1] if crc != crc[::-1] else b"\0\0\0\0"
        u6.sendto(body + crc, (dst6, 4791))
    else:
        sys.exit("unknown kind " + kind)
    # Pace the sender: VM 1 must not drop packets below rrxe.
    if i % 20 == 19:
        time.sleep(0.02)
EOF

if [ "$VM" = 1 ]; then
	check "link-add-vm1" rdma_up
	check "sockets-open" bash -c "ss -ulnH 'sport = :4791' | grep -q 4791"
	check "ipv6-socket-open" bash -c "ss -ulnH 'sport = :4791' | grep -c 4791 | grep -qx 2"
	# VM 2 resolves our addresses (ARP, ND) before it sends.
	barrier ready
	while read -r kind cnt; do
		[ -n "$kind" ] || continue
		before_pkts=$(port_counter rcvd_pkts)
		before=$( [ "$cnt" = - ] || port_counter "$cnt")
		barrier "go-$kind"
		barrier "sent-$kind" 300
		want=$N
		[ "$kind" = fragmented ] && want=50
		if [ "$DRIVER" = rrxe ] && [ "$cnt" != - ]; then
			# The softirq may still be counting: wait for the count (3 s
			# at most), then 0.3 s more for any packet counted twice.
			for _ in $(seq 30); do
				[ $(($(port_counter "$cnt") - before)) -lt "$want" ] || break
				sleep 0.1
			done
			sleep 0.3
		else
			sleep 1
		fi
		after_pkts=$(port_counter rcvd_pkts)
		if [ "$DRIVER" = rrxe ] && [ "$cnt" != - ]; then
			after=$(port_counter "$cnt")
			echo "# $kind: $cnt +$((after - before)) (want $want), rcvd_pkts +$((after_pkts - before_pkts))"
			check "drops-$kind" test "$((after - before))" -eq "$want" \
				-a "$((after_pkts - before_pkts))" -eq 0
		else
			echo "# $kind: rcvd_pkts +$((after_pkts - before_pkts))"
			check "no-rcvd-$kind" test "$((after_pkts - before_pkts))" -eq 0
		fi
	done <<<"$KINDS"
	if [ "$DRIVER" = rrxe ]; then
		echo "# counters after the garbage:"
		grep -H . "$HWC"/rcvd_* | sed "s|$HWC/|    |"
		check "counters-in-rdma-statistic" bash -c \
			"rdma statistic show link $IBDEV/1 | grep -q 'rcvd_drop_bad_icrc'"
	fi
	check "still-active" bash -c \
		"ibv_devinfo -d $IBDEV | grep -q 'state:.*PORT_ACTIVE'"

	# The sockets go with the last link and come back with the next one.
	check "link-delete" rdma link delete "$IBDEV"
	check "sockets-closed" bash -c "! ss -ulnH 'sport = :4791' | grep -q 4791"
	check "link-add-again" rdma link add "$IBDEV" type "$DRIVER" netdev eth0
	check "sockets-reopened" bash -c "ss -ulnH 'sport = :4791' | grep -q 4791"
	check "active-again" wait_port_active "$IBDEV"
	# Unloading with a device and its sockets present (rrxe). rdma_rxe
	# refuses to unload while it has a device ("in use"), so for rxe the
	# link goes first and only the unload itself is checked.
	mod=$DRIVER
	[ "$DRIVER" = rxe ] && mod=rdma_rxe
	echo "# $mod refcnt with a device: $(cat /sys/module/$mod/refcnt)"
	if [ "$DRIVER" = rxe ]; then
		check "link-delete-before-unload" rdma link delete "$IBDEV"
		echo "# $mod refcnt without: $(cat /sys/module/$mod/refcnt)"
	fi
	check "module-unload" modprobe -r "$mod"
	check "sockets-closed-at-unload" bash -c "! ss -ulnH 'sport = :4791' | grep -q 4791"
	check "no-device-after-unload" bash -c "! test -e /sys/class/infiniband/$IBDEV"
else
	retry 30 ping -6 -c1 -W1 "$PEER_IP6" >/dev/null
	ping -c1 -W1 "$PEER_IP" >/dev/null
	barrier ready
	while read -r kind cnt; do
		[ -n "$kind" ] || continue
		n=$N
		[ "$kind" = fragmented ] && n=50
		barrier "go-$kind"
		check "send-$kind" python3 /tmp/garbage.py "$kind" "$n" \
			"$MY_IP" "$PEER_IP" "$MY_IP6" "$PEER_IP6"
		barrier "sent-$kind" 300
	done <<<"$KINDS"
fi
finish
