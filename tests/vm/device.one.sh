# Device registration and queries, for any DRIVER (rxe or rrxe), in one VM:
# link add/show/delete, ibv_devinfo (port state, link layer, MTU, GIDs),
# MTU and carrier changes with their async events, the C driver's errors for
# bad `rdma link add`, removal of the device with its net device, pyverbs'
# test_device and test_pd, and module unload with a device present; the
# sysfs `parent`, the writable node description and the port capability
# mask the connection manager sets and clears.
# runs: rrxe@debug rxe@fast
# full-runs: rxe@debug

check "link-add" rdma_up

devinfo_ok() {
	local info
	info=$(ibv_devinfo -v -d "$IBDEV") || return 1
	echo "$info" | grep -E 'hca_id|node_guid|state:|link_layer|active_mtu|GID\['
	echo "$info" | grep -q 'state:.*PORT_ACTIVE (4)' &&
		echo "$info" | grep -q 'link_layer:.*Ethernet' &&
		echo "$info" | grep -q 'active_mtu:.*1024 (3)' &&
		echo "$info" | grep -qE "GID\[ *[0-9]+\]:.*::ffff:$MY_IP, RoCE v2" &&
		echo "$info" | grep -qE 'GID\[ *0\]:.*fe80::'
}
check "devinfo" devinfo_ok
check "link-show" bash -c "rdma link show | grep -E '^link $IBDEV/1 state ACTIVE .*netdev eth0'"
check "ibv-devices" bash -c "ibv_devices | grep -w '$IBDEV'"

# sysfs `parent` names the net device, as on the C driver (tools written
# for it find a device's netdev there); rrxe had no such file before.
parent_is_eth0() {
	cat "/sys/class/infiniband/$IBDEV/parent" &&
		[ "$(cat "/sys/class/infiniband/$IBDEV/parent")" = eth0 ]
}
check "sysfs-parent" parent_is_eth0

# The node description is writable through sysfs (ib_modify_device), the
# first 64 bytes kept, as on the C driver; before rrxe had modify_device the
# write failed with EOPNOTSUPP.
ND=/sys/class/infiniband/$IBDEV/node_desc
node_desc_writable() {
	local old d64
	old=$(cat "$ND")
	echo "node_desc was '$old'"
	echo -n "rrxe node description test" >"$ND" || return 1
	[ "$(cat "$ND")" = "rrxe node description test" ] || { echo "reads back '$(cat "$ND")'"; return 1; }
	d64=$(printf 'n%.0s' $(seq 64))
	echo -n "$d64" >"$ND" || return 1
	[ "$(cat "$ND")" = "$d64" ] || { echo "64 bytes read back as '$(cat "$ND")'"; return 1; }
	# Longer: the RDMA core keeps the first 64 bytes.
	echo -n "${d64}xyz" >"$ND" || return 1
	[ "$(cat "$ND")" = "$d64" ] || { echo "67 bytes read back as '$(cat "$ND")'"; return 1; }
	echo -n "$old" >"$ND" && [ "$(cat "$ND")" = "$old" ]
}
check "node-desc-writable" node_desc_writable

# The connection manager sets CM_SUP in the port's capability mask when it
# binds to the device and clears it when it leaves (ib_modify_port), as on
# the C driver; before rrxe had modify_port the bit was always set.
CAP=/sys/class/infiniband/$IBDEV/ports/1/cap_mask
has_cm_sup() { [ $(($(cat "$CAP") & 0x10000)) -ne 0 ]; }
cm_sup_follows_ib_cm() {
	local rc=0
	echo "cap_mask with ib_cm: $(cat "$CAP")"
	has_cm_sup || rc=1
	if modprobe -r rdma_ucm rdma_cm ib_cm; then
		echo "cap_mask without ib_cm: $(cat "$CAP")"
		! has_cm_sup || rc=1
	else
		grep -E '^(rdma_ucm|rdma_cm|ib_cm|iw_cm) ' /proc/modules
		rc=1
	fi
	# The rest of the suite needs the RDMA CM back.
	modprobe rdma_ucm || return 1
	echo "cap_mask with ib_cm again: $(cat "$CAP")"
	has_cm_sup && return $rc
}
check "cm-sup-follows-ib-cm" cm_sup_follows_ib_cm

active_mtu_is() { ibv_devinfo -d "$IBDEV" | grep -q "active_mtu:.*$1"; }
mtu_follows() {
	ip link set eth0 mtu 9000 && active_mtu_is '4096 (5)' &&
		ip link set eth0 mtu 2200 && active_mtu_is '2048 (4)' &&
		ip link set eth0 mtu 1500 && active_mtu_is '1024 (3)'
}
check "mtu-follows-netdev" mtu_follows

port_state_is() { grep -q "$1" "/sys/class/infiniband/$IBDEV/ports/1/state"; }
link_flap() {
	local ev=/tmp/async-events rc=0
	timeout 15 ibv_asyncwatch -d "$IBDEV" >"$ev" 2>&1 &
	local aw=$!
	sleep 1
	ip link set eth0 down
	retry 10 port_state_is DOWN || rc=1
	ip link set eth0 up
	retry 20 port_state_is ACTIVE || rc=1
	sleep 1
	kill "$aw" 2>/dev/null
	wait "$aw"
	cat "$ev"
	grep -q PORT_ERR "$ev" && grep -q PORT_ACTIVE "$ev" && [ $rc -eq 0 ]
}
check "port-follows-carrier" link_flap
check "link-downed-counted" bash -c \
	"[ \$(cat /sys/class/infiniband/$IBDEV/ports/1/hw_counters/link_downed) -ge 1 ]"

# fails_with MSG CMD...: CMD must fail and print MSG (the strerror of the
# C driver's errno).
fails_with() {
	local msg=$1 out
	shift
	out=$("$@" 2>&1) && { echo "unexpected success: $out"; return 1; }
	echo "$out"
	echo "$out" | grep -q "$msg"
}
check "add-nonexistent-netdev" fails_with "No such device" \
	rdma link add "${DRIVER}9" type "$DRIVER" netdev nosuch0
check "add-duplicate-netdev" fails_with "File exists" \
	rdma link add "${DRIVER}9" type "$DRIVER" netdev eth0
ip link add link eth0 name eth0.7 type vlan id 7
check "add-vlan-netdev" fails_with "Operation not permitted" \
	rdma link add "${DRIVER}9" type "$DRIVER" netdev eth0.7
ip link del eth0.7
check "delete-unknown-link" fails_with "" rdma link delete "${DRIVER}9"
check "no-partial-device" bash -c "! ls /sys/class/infiniband | grep -w '${DRIVER}9'"

netdev_unregister() {
	ip link add rva type veth peer name rvb && ip link set rva up && ip link set rvb up &&
		rdma link add "${DRIVER}1" type "$DRIVER" netdev rva &&
		wait_port_active "${DRIVER}1" &&
		ip link del rva &&
		retry 10 bash -c "! test -e /sys/class/infiniband/${DRIVER}1"
}
check "netdev-unregister-removes-device" netdev_unregister

pyverbs_device_pd() {
	cd /opt/pyverbs && timeout 600 python3 tests/run_tests.py --dev "$IBDEV" --gid 1 -v test_device test_pd
}
check "pyverbs-device-pd" pyverbs_device_pd

check "link-delete" rdma link delete "$IBDEV"
check "link-re-add" rdma link add "$IBDEV" type "$DRIVER" netdev eth0
unload() {
	case $DRIVER in
	# rdma_rxe stays "in use" while its device exists; delete it first.
	rxe) rdma link delete "$IBDEV" && modprobe -r rdma_rxe ;;
	# rrxe unregisters its devices at unload.
	*) modprobe -r "$DRIVER" ;;
	esac &&
		! ls /sys/class/infiniband 2>/dev/null | grep -q .
}
check "unload" unload

# rrxe's KUnit suites run when the module loads (the debug kernel has KUnit;
# the harness boots it with kunit.enable=1 kunit.autorun=1).
if [ "$DRIVER" = rrxe ] && [ "$KERNEL" = debug ]; then
	kunit_ok() {
		local results
		results=$(dmesg | sed 's/^\[[^]]*\] *//' | grep -E '^ *(not )?ok [0-9]+ rrxe_')
		echo "$results"
		[ -n "$results" ] && ! echo "$results" | grep -q 'not ok'
	}
	check "kunit" kunit_ok
fi
finish
