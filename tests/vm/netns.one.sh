# Devices in two network namespaces at once, in one VM: a veth pair joins
# namespaces ns1 (10.9.0.1) and ns2 (10.9.0.2); `rdma link add` run inside
# each namespace binds a device to that namespace's veth end, and the
# RoCEv2 traffic between them goes through each namespace's own UDP socket
# on port 4791 (the C driver's rxe_ns.c; rrxe's ns.rs).  Checked: each
# namespace has a socket on 4791 while its device exists, ibv_rc_pingpong
# and rping -V between the namespaces (data verified), the packet counters
# of both devices move, and the sockets go with the devices.
# runs: rrxe@debug
# full-runs: rxe@fast rxe@debug

modprobe "$([ "$DRIVER" = rxe ] && echo rdma_rxe || echo rrxe)"
modprobe ib_uverbs
modprobe rdma_ucm
A=${DRIVER}a
B=${DRIVER}b

check "netns-setup" netns_veth_pair

# `rdma link add` finds the net device in the caller's namespace.
check "link-add-ns1" ip netns exec ns1 rdma link add "$A" type "$DRIVER" netdev veth1
check "link-add-ns2" ip netns exec ns2 rdma link add "$B" type "$DRIVER" netdev veth2
check "port-active-a" wait_port_active "$A"
check "port-active-b" wait_port_active "$B"

# udp_listening NS: a UDP socket on port 4791 in namespace NS.
udp_listening() { ip netns exec "$1" ss -ulnH 'sport = :4791' | grep -q 4791; }
check "socket-ns1" retry 10 udp_listening ns1
check "socket-ns2" retry 10 udp_listening ns2
# The initial namespace has no device, hence no socket.
check "no-socket-init-ns" bash -c "! ss -ulnH 'sport = :4791' | grep -q 4791"

GA=$(gid_index "$A" 10.9.0.1)
GB=$(gid_index "$B" 10.9.0.2)
echo "# GID indexes: $A $GA, $B $GB"
counter() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2" 2>/dev/null || echo 0; }
a0=$(counter "$A" rcvd_pkts)
b0=$(counter "$B" rcvd_pkts)

# pingpong DEV GID ARGS...: ibv_rc_pingpong server in ns1, client in ns2.
pingpong() {
	local log pid rc
	log=$(mktemp)
	ip netns exec ns1 timeout 120 ibv_rc_pingpong -d "$A" -g "$GA" -s 4096 -n 200 -c -p 18530 >"$log" 2>&1 &
	pid=$!
	retry 30 bash -c "ip netns exec ns1 ss -ltnH 'sport = :18530' | grep -q 18530"
	ip netns exec ns2 timeout 120 ibv_rc_pingpong -d "$B" -g "$GB" -s 4096 -n 200 -c -p 18530 10.9.0.1
	rc=$?
	wait "$pid" || rc=1
	cat "$log"
	rm -f "$log"
	return $rc
}
check "rc-pingpong" pingpong

rping_pair() {
	local log pid rc
	log=$(mktemp)
	ip netns exec ns1 timeout 120 rping -s -a 10.9.0.1 -p 18531 -V -C 50 -S 4096 >"$log" 2>&1 &
	pid=$!
	# The client fails at once while the server does not listen yet.
	retry 30 ip netns exec ns2 timeout 120 rping -c -a 10.9.0.1 -p 18531 -V -C 50 -S 4096
	rc=$?
	wait "$pid" || rc=1
	cat "$log"
	rm -f "$log"
	return $rc
}
check "rping-verify" rping_pair

moved() {
	local a b
	a=$(($(counter "$A" rcvd_pkts) - a0))
	b=$(($(counter "$B" rcvd_pkts) - b0))
	echo "rcvd_pkts: $A +$a, $B +$b"
	[ "$a" -ge 200 ] && [ "$b" -ge 200 ]
}
check "counters-moved" moved

check "link-delete-a" rdma link delete "$A"
check "socket-ns1-gone" retry 10 bash -c "! ip netns exec ns1 ss -ulnH 'sport = :4791' | grep -q 4791"
check "socket-ns2-stays" udp_listening ns2
check "link-delete-b" rdma link delete "$B"
check "socket-ns2-gone" retry 10 bash -c "! ip netns exec ns2 ss -ulnH 'sport = :4791' | grep -q 4791"
ip netns del ns1
ip netns del ns2
finish
