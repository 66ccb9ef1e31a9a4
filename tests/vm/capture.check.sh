#!/bin/bash
# tests/vm/capture.check.sh DIR: the host half of the capture suite
# (tests/vm/capture.pair.sh, whose "# host-check:" line has tests/run call
# this after each run with the run's folder of VM 1, results/<boot>/vm1/out/
# capture-<driver>-<kernel>).  Examines the capture VM 1 left there as
# capture.pcap (DIR may also be the results folder of a run-pair of the
# suite alone, which leaves it in vm1/out/):
#   capture-nonempty    it holds RoCEv2 packets (UDP to port 4791);
#   icrc-all-valid      every one carries the ICRC that tests/tools/icrc_check.py
#                       computes independently (IBTA RoCEv2 Annex A17);
#   tshark-decodes-all  tshark's RoCEv2 dissector decodes every one of them as
#                       InfiniBand, none malformed.
# Run by hand on any run: tests/vm/capture.check.sh results/latest/vm1/out/capture-rrxe-fast
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
run=${1:-}
label=${DRIVER:+-$DRIVER}
pcap=$run/capture.pcap
[ -f "$pcap" ] || pcap=$run/vm1/out/capture.pcap
failed=0
result() { # result OK NAME [NOTE]
	if [ "$1" -eq 0 ]; then echo "ok $2$label${3:+ # $3}"; else echo "not ok $2$label${3:+ # $3}"; failed=1; fi
}

if [ -z "$run" ] || [ ! -s "$pcap" ]; then
	echo "# no capture at ${pcap}"
	result 1 capture-nonempty "no capture file"
	exit 1
fi

# tshark counts: frames, UDP datagrams to 4791, decoded as InfiniBand,
# malformed.  -d pins the decode-as on top of the default port registration.
# The heuristics that guess at upper protocols in the RDMA payload (RPC over
# RDMA, SMB Direct, iSER, ...) are off: the test traffic's payload is
# arbitrary bytes, which they would report as malformed upper-layer packets.
targs=(-d udp.port==4791,infiniband)
tcount() {
	tshark -r "$pcap" "${targs[@]}" -Y "$1" -T fields -e frame.number 2>/dev/null | wc -l
}
roce=0
if command -v tshark >/dev/null; then
	# (Disabled as protocols: tshark 4.0 lists heuristics by protocol, not
	# by the short name --disable-heuristic wants.  Not ethertype or
	# InfiniBand's own.)
	for p in $(tshark -G heuristic-decodes 2>/dev/null |
		awk '$1 ~ /^infiniband\./ && $2 != "ethertype" && $2 !~ /^infiniband/ { print $2 }' | sort -u); do
		targs+=(--disable-protocol "$p")
	done
	frames=$(tcount frame)
	roce=$(tcount "udp.dstport == 4791")
	echo "# tshark: $frames frames, $roce UDP datagrams to port 4791"
fi

out=$(python3 "$root/tests/tools/icrc_check.py" "$pcap")
rc=$?
echo "$out" | sed 's/^/    /'
packets=$(echo "$out" | sed -n 's/.* \([0-9]*\) RoCEv2 packets.*/\1/p' | head -n 1)
valid=$(echo "$out" | sed -n 's/.* \([0-9]*\) ICRC valid.*/\1/p' | head -n 1)
result "$([ "${packets:-0}" -gt 0 ]; echo $?)" capture-nonempty "${packets:-0} RoCEv2 packets"
result "$rc" icrc-all-valid "${valid:-0} of ${packets:-0} ICRCs valid"

if ! command -v tshark >/dev/null; then
	result 1 tshark-decodes-all "tshark missing on the host (make host-deps)"
	exit 1
fi
ib=$(tcount infiniband)
notib=$(tcount "udp.dstport == 4791 && !infiniband")
# Malformed packets only: tshark also files an IPv6 UDP checksum of zero as
# an "Error/Checksum" expert item, but RoCEv2 senders zero the UDP checksum
# (the ICRC covers the packet; RFC 6935 allows it for tunnels), rdma_rxe
# over IPv6 included.
malformed=$(tcount _ws.malformed)
echo "# tshark: $ib decoded as InfiniBand, $notib RoCEv2 datagrams not decoded, $malformed malformed"
if [ "$malformed" -gt 0 ]; then
	tshark -r "$pcap" "${targs[@]}" -Y _ws.malformed 2>/dev/null | head -n 10 | sed 's/^/    /'
fi
ok=1
[ "$roce" -gt 0 ] && [ "$ib" -eq "$roce" ] && [ "$notib" -eq 0 ] && [ "$malformed" -eq 0 ] &&
	[ "$roce" -eq "${packets:-0}" ] && ok=0
result "$ok" tshark-decodes-all "$ib of $roce decoded, $malformed malformed; checker saw ${packets:-0}"
exit $failed
