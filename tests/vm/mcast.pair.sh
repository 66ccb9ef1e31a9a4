# UD multicast through the raw verbs (ibv_attach_mcast), IPv4 and IPv6,
# between two VMs: tests/tools/ud-mcast.  VM 1 attaches two UD QPs to the
# group, VM 2 sends 20 datagrams to it; both QPs receive each one, checked
# byte for byte with the GRH (group as destination, sender as source); a
# QP still attached cannot be destroyed (EBUSY, as rdma_rxe); after one QP
# detaches only the other receives the next 5.  The IPv4 group uses the
# IPv4 GIDs (the IPv4-mapped MGID, what mckey tests through the RDMA CM),
# the IPv6 group the GIDs of fd00:4791::VM: the RDMA CM refuses IPv6
# multicast on RoCEv2, so the raw verbs are the only way to it.  The port
# counters of VM 1 count each datagram once per packet received (not once
# per QP).
# runs: rrxe@debug
# full-runs: rxe@fast rxe@debug rxe+rrxe@debug rrxe+rxe@debug
# tools: ud-mcast
# timeout: 600

TOOL=/rrxe/in/ud-mcast
MY_IP6=fd00:4791::$VM
ip -6 addr add "$MY_IP6/64" dev eth0 nodad
check "link-add-vm$VM" rdma_up
check "tool-staged" test -x "$TOOL"
GID=$(gid_index "$IBDEV" "$MY_IP")
GID6=$(gid_index6 "$IBDEV" "$MY_IP6")
echo "# GID index: IPv4 $GID, IPv6 ${GID6:-none}"
check "gid6-vm$VM" test -n "$GID6"

# mcast_case NAME MGID GID_INDEX PORT: one run of the tool; its "ok"/"not
# ok" lines become this suite's cases.
mcast_case() {
	local name=$1 mgid=$2 gidx=$3 port=$4 out=/tmp/$1.out rc pid rcvd0
	rcvd0=$(port_counter rcvd_pkts)
	if [ "$VM" = 1 ]; then
		timeout -k 5 120 "$TOOL" recv "$IBDEV" "$gidx" "$mgid" "$port" >"$out" 2>&1 &
		pid=$!
		retry 60 tcp_listening "$port" || echo "# $name: receiver not listening"
		barrier "$name" 120
		wait "$pid"
		rc=$?
	else
		barrier "$name" 120
		timeout -k 5 120 "$TOOL" send "$IBDEV" "$gidx" "$mgid" "$PEER_IP" "$port" >"$out" 2>&1
		rc=$?
	fi
	grep -avE '^(not )?ok ' "$out" | cat -v | sed 's/^/    /' | head -n 40
	relay_results "$name" "$out"
	check "$name-exit-vm$VM" test "$rc" -eq 0
	if [ "$VM" = 1 ]; then
		# 25 datagrams, one packet each, whatever the number of QPs.
		check "$name-rcvd-pkts-vm1" bash -c "d=\$((\$(cat /sys/class/infiniband/$IBDEV/ports/1/hw_counters/rcvd_pkts) - $rcvd0)); echo \"rcvd_pkts +\$d\"; [ \$d -ge 25 ] && [ \$d -lt 50 ]"
	fi
}
mcast_case ipv4 ::ffff:239.4.79.1 "$GID" 47900
mcast_case ipv6 ff0e::4791:1 "$GID6" 47901
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
