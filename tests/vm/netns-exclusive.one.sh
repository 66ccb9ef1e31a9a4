# The RDMA subsystem in exclusive network-namespace mode (`rdma system set
# netns exclusive`), in one VM: a device belongs to one namespace, and
# only that namespace sees and uses it.
#   created-inside  `rdma link add` run in ns1 (veth1) and in ns2 (veth2):
#                   each device is listed by `rdma dev` and `ibv_devices`
#                   in its own namespace only, not in the other nor in the
#                   initial one; a data-checked ibv_rc_pingpong runs
#                   between them. rdma_rxe allocates every device in the
#                   initial namespace, so its devices made in ns1 and ns2
#                   are out of their reach there (printed, not judged).
#   moved           a device made in the initial namespace on eth0 is
#                   moved with `rdma dev set DEV netns ns3` (which the RDMA
#                   core allows only to drivers with disassociate_ucontext;
#                   rdma_rxe gets EOPNOTSUPP, printed): it leaves the
#                   initial namespace's lists, ns3 lists it, a loopback
#                   ping-pong runs in ns3, and when ns3 is deleted the
#                   device comes back to the initial namespace
# The mode goes back to shared at the end (it can change only while no
# other namespace exists).
# runs: rrxe@debug
# full-runs: rxe@debug
# timeout: 400

modprobe "$([ "$DRIVER" = rxe ] && echo rdma_rxe || echo rrxe)"
modprobe ib_uverbs
modprobe rdma_ucm
A=${DRIVER}a
B=${DRIVER}b
M=${DRIVER}m

check "no-namespaces" test -z "$(ip netns list)"
# Namespaces of earlier suites go away asynchronously.
check "set-exclusive" retry 60 rdma system set netns exclusive
check "mode-exclusive" bash -c "rdma system show | grep -q 'netns exclusive'"

check "netns-setup" netns_veth_pair

check "link-add-ns1" ip netns exec ns1 rdma link add "$A" type "$DRIVER" netdev veth1
check "link-add-ns2" ip netns exec ns2 rdma link add "$B" type "$DRIVER" netdev veth2

# lists NS: the RDMA devices namespace NS ("init": the initial one) sees,
# through netlink and through the verbs library (sysfs of that namespace).
lists() {
	if [ "$1" = init ]; then
		rdma dev show | awk '{ print $2 }' | tr -d :
		ibv_devices | awk 'NR > 2 { print $1 }'
	else
		ip netns exec "$1" rdma dev show | awk '{ print $2 }' | tr -d :
		ip netns exec "$1" ibv_devices | awk 'NR > 2 { print $1 }'
	fi
}
# sees NS DEV...: NS lists each DEV twice (netlink and verbs) and no other
# device of the driver.
sees() {
	local ns=$1 got want
	shift
	got=$(lists "$ns" | grep "^$DRIVER" | sort | tr '\n' ' ')
	want=$(for d in "$@"; do echo "$d"; echo "$d"; done | sort | tr '\n' ' ')
	echo "$ns lists: ${got:-nothing}; want: ${want:-nothing}"
	[ "$got" = "$want" ]
}
# ns_gid NS DEV IP: gid_index run in namespace NS (whose sysfs shows DEV).
ns_gid() { ip netns exec "$1" bash -c "$(declare -f gid_index); gid_index $2 $3"; }

if [ "$DRIVER" = rrxe ]; then
	check "ns1-sees-only-a" retry 10 sees ns1 "$A"
	check "ns2-sees-only-b" sees ns2 "$B"
	check "init-sees-neither" sees init
	GA=$(ns_gid ns1 "$A" 10.9.0.1)
	GB=$(ns_gid ns2 "$B" 10.9.0.2)
	echo "# GID indexes: $A ${GA:-none}, $B ${GB:-none}"
	pingpong() {
		local pid rc
		ip netns exec ns1 timeout 120 ibv_rc_pingpong -d "$A" -g "$GA" -s 4096 -n 100 -c -p 18540 &
		pid=$!
		retry 30 bash -c "ip netns exec ns1 ss -ltnH 'sport = :18540' | grep -q 18540"
		ip netns exec ns2 timeout 120 ibv_rc_pingpong -d "$B" -g "$GB" -s 4096 -n 100 -c -p 18540 10.9.0.1
		rc=$?
		wait "$pid" || rc=1
		return $rc
	}
	check "pingpong-between" pingpong
else
	for ns in ns1 ns2 init; do
		echo "# $DRIVER: $ns lists: $(lists $ns | grep "^$DRIVER" | sort | tr '\n' ' ')"
	done
fi
ip netns exec ns1 rdma link delete "$A" 2>/dev/null || rdma link delete "$A"
ip netns exec ns2 rdma link delete "$B" 2>/dev/null || rdma link delete "$B"

# moved
check "link-add-init" rdma link add "$M" type "$DRIVER" netdev eth0
check "port-active-m" wait_port_active "$M"
ip netns add ns3
ip -n ns3 link set lo up
if [ "$DRIVER" = rrxe ]; then
	check "move-to-ns3" rdma dev set "$M" netns ns3
	check "ns3-sees-m" retry 10 sees ns3 "$M"
	check "init-sees-no-m" sees init
	GM=$(ns_gid ns3 "$M" "$MY_IP")
	echo "# GID index of $M in ns3: ${GM:-none}"
	# The TCP exchange over ns3's loopback, the RDMA traffic through eth0's
	# GID, delivered locally.
	loopback() {
		local pid rc
		ip netns exec ns3 timeout 120 ibv_rc_pingpong -d "$M" -g "$GM" -s 4096 -n 50 -c -p 18541 &
		pid=$!
		retry 30 bash -c "ip netns exec ns3 ss -ltnH 'sport = :18541' | grep -q 18541"
		ip netns exec ns3 timeout 120 ibv_rc_pingpong -d "$M" -g "$GM" -s 4096 -n 50 -c -p 18541 127.0.0.1
		rc=$?
		wait "$pid" || rc=1
		return $rc
	}
	check "pingpong-in-ns3" loopback
	ip netns del ns3
	check "back-in-init" retry 30 sees init "$M"
else
	rdma dev set "$M" netns ns3
	echo "# $DRIVER: rdma dev set netns exit $?"
	ip netns del ns3
fi
check "link-delete-m" rdma link delete "$M"

ip netns del ns1
ip netns del ns2
check "set-shared" retry 60 rdma system set netns shared
finish
