# Host test of the independent ICRC checker (tests/tools/icrc_check.py) on a
# stored capture of C-driver (rdma_rxe) traffic, tests/data/rxe-roce.pcap:
# it must pass the capture as it is, still pass it with the fields Annex A17
# masks out of the ICRC changed (IPv4 TOS, TTL, checksum; IPv6 traffic
# class, flow label, hop limit; UDP checksum; BTH resv8a), and fail it with
# any covered byte changed (IP identification, addresses, BTH, payload, the
# ICRC itself), with no RoCEv2 packet at all, and on a file that is no pcap.
# Then the capture suite's host check runs end to end on the stored capture
# and on a corrupted copy (with tshark, which make host-deps installs).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
checker=$root/tests/tools/icrc_check.py
pcap=$root/tests/data/rxe-roce.pcap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok() { echo "ok $*"; }
not_ok() { echo "not ok $*"; failed=1; }

# expect NAME WANT_STATUS PCAP [PATTERN]: the checker exits WANT_STATUS on
# PCAP and, when given, prints a line matching PATTERN.
expect() {
	local name=$1 want=$2 file=$3 pattern=${4:-} out rc
	out=$(python3 "$checker" "$file" 2>&1)
	rc=$?
	if [ "$rc" -eq "$want" ] && { [ -z "$pattern" ] || echo "$out" | grep -qE "$pattern"; }; then
		ok "icrc-check-$name"
	else
		echo "$out" | sed 's/^/    /'
		not_ok "icrc-check-$name (status $rc, wanted $want${pattern:+, output matching '$pattern'})"
	fi
}

# mutate FIELD OUT: write a copy of the stored capture with FIELD changed in
# the first RoCEv2 packet of its family (v4 or v6), and print that frame's
# number.
mutate() {
	python3 - "$pcap" "$1" "$2" <<'EOF'
import struct, sys
src, field, dst = sys.argv[1:]
data = bytearray(open(src, "rb").read())
family = "v6" if field.startswith("v6-") else "v4"
off, frame = 24, 0
while off < len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    pkt, frame = off + 16, frame + 1
    off = pkt + incl
    etype = struct.unpack_from("!H", data, pkt + 12)[0]
    ip = pkt + 14
    if family == "v4" and etype == 0x0800 and data[ip + 9] == 17:
        udp = ip + 20
    elif family == "v6" and etype == 0x86DD and data[ip + 6] == 17:
        udp = ip + 40
    else:
        continue
    if struct.unpack_from("!H", data, udp + 2)[0] != 4791:
        continue
    bth, end = udp + 8, udp + struct.unpack_from("!H", data, udp + 4)[0]
    where = {
        # masked out of the ICRC
        "tos": ip + 1, "ttl": ip + 8, "ip-csum": ip + 10,
        "v6-tclass": ip + 1, "v6-flow": ip + 2, "v6-hop": ip + 7,
        "udp-csum": udp + 6, "v6-udp-csum": udp + 6, "resv8a": bth + 4,
        # covered by it
        "ip-id": ip + 4, "ip-src": ip + 12, "ip-dst": ip + 19,
        "v6-src": ip + 8, "v6-dst": ip + 39,
        "udp-sport": udp + 1, "opcode": bth, "pkey": bth + 3,
        "qpn": bth + 7, "psn": bth + 11, "payload": end - 5, "icrc": end - 1,
        "v6-payload": end - 5,
    }[field]
    # Flip bits of the field only (the traffic class shares its byte
    # with the flow label, which is masked too).
    data[where] ^= 0x10 if field == "v6-tclass" else 0x5A
    open(dst, "wb").write(data)
    print(frame)
    sys.exit(0)
sys.exit("no %s RoCEv2 packet in %s" % (family, src))
EOF
}

[ -s "$pcap" ] || { not_ok "icrc-check-stored-capture-present ($pcap)"; exit 1; }
expect stored-rxe-capture 0 "$pcap" ' 0 invalid$'
python3 "$checker" "$pcap" | sed 's/^/    /'

for f in tos ttl ip-csum udp-csum resv8a v6-tclass v6-flow v6-hop v6-udp-csum; do
	if frame=$(mutate "$f" "$tmp/$f.pcap"); then
		expect "masked-$f" 0 "$tmp/$f.pcap" ' 0 invalid$'
	else
		not_ok "icrc-check-masked-$f (no packet to change)"
	fi
done
for f in ip-id ip-src ip-dst udp-sport opcode pkey qpn psn payload icrc \
	v6-src v6-dst v6-payload; do
	if frame=$(mutate "$f" "$tmp/$f.pcap"); then
		expect "covered-$f" 1 "$tmp/$f.pcap" "^FAIL frame $frame .*ICRC"
	else
		not_ok "icrc-check-covered-$f (no packet to change)"
	fi
done

# A capture that ends inside a packet is no pcap we can trust.
head -c $(($(stat -c %s "$pcap") - 3)) "$pcap" >"$tmp/cut.pcap"
expect truncated-file 2 "$tmp/cut.pcap" 'truncated'
# No RoCEv2 packet at all: only the file header.
head -c 24 "$pcap" >"$tmp/empty.pcap"
expect no-packets 1 "$tmp/empty.pcap" 'no RoCEv2 packets'
echo "this is a text file, not a packet capture" >"$tmp/text.pcap"
expect not-a-pcap 2 "$tmp/text.pcap" 'not a pcap'

# The capture suite's host check (tests/vm/capture.check.sh) on a results
# folder holding the stored capture, then the copy with a payload byte
# changed: all three cases pass, then icrc-all-valid fails.
if command -v tshark >/dev/null; then
	mkdir -p "$tmp/run/vm1/out"
	cp "$pcap" "$tmp/run/vm1/out/capture.pcap"
	out=$(DRIVER=stored bash "$root/tests/vm/capture.check.sh" "$tmp/run" 2>&1)
	if [ $? -eq 0 ] && [ "$(echo "$out" | grep -c '^ok ')" -eq 3 ]; then
		ok "capture-check-stored"
	else
		echo "$out" | sed 's/^/    /'
		not_ok "capture-check-stored"
	fi
	cp "$tmp/payload.pcap" "$tmp/run/vm1/out/capture.pcap"
	out=$(DRIVER=stored bash "$root/tests/vm/capture.check.sh" "$tmp/run" 2>&1)
	if [ $? -ne 0 ] && echo "$out" | grep -q '^not ok icrc-all-valid'; then
		ok "capture-check-corrupted"
	else
		echo "$out" | sed 's/^/    /'
		not_ok "capture-check-corrupted"
	fi
else
	ok "capture-check-stored # skip: no tshark (make host-deps)"
fi
exit $failed
