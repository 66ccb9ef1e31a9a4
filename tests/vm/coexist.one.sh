# rrxe beside the C driver rdma_rxe in one VM.  Both register their devices
# with RDMA_DRIVER_RXE, so they must never be active together: rdma_rxe's
# net device notifier would take an rrxe device for its own struct rxe_dev
# (KASAN slab-out-of-bounds on an MTU change, link down or carrier loss), and
# unloading either module used to unregister the other's devices.  rrxe
# refuses rdma_rxe while it has a device, refuses devices while rdma_rxe is
# loaded (both with EBUSY and one kernel message), and its unload touches
# only its own devices.  Both orders, under KASAN and lockdep: any kernel
# report fails the run.
# runs: rrxe@debug
# timeout: 300

# fails_with MSG CMD...: CMD must fail and print MSG.
fails_with() {
	local msg=$1 out
	shift
	out=$("$@" 2>&1) && { echo "unexpected success: $out"; return 1; }
	echo "$out"
	echo "$out" | grep -q "$msg"
}
# logged MSG: the kernel printed MSG (once) during this suite.
logged() {
	local n
	n=$(dmesg | grep -cF "$1")
	dmesg | grep -F "$1"
	[ "$n" -eq 1 ]
}
loaded() { grep -q "^$1 " /proc/modules; }
not() { ! "$@"; }
active() { ibv_devinfo -d "$1" | grep -q 'state:.*PORT_ACTIVE'; }
# pingpong DEV IP: an RC ping-pong of DEV with itself through its RoCEv2
# GID of IP, data checked.
pingpong() {
	local dev=$1 gid log=/tmp/pp-$1.log pid
	gid=$(retry 20 gid_index "$dev" "$2") || return 1
	timeout 60 ibv_rc_pingpong -d "$dev" -g "$gid" -c -s 1024 -n 20 -p 18515 >"$log" 2>&1 &
	pid=$!
	retry 20 tcp_listening 18515 || return 1
	output_ok 'invalid data' timeout 60 \
		ibv_rc_pingpong -d "$dev" -g "$gid" -c -s 1024 -n 20 -p 18515 127.0.0.1 &&
		wait_ok 'invalid data' "$pid" "$log"
}

# rva/rvb: a second net device for rrxe; rvc/rvd (10.9.0.1 on rvc): the C
# driver's, apart from eth0, so that a failure of one part does not block
# the next.
ip link add rva type veth peer name rvb && ip link set rva up && ip link set rvb up
ip link add rvc type veth peer name rvd && ip addr add 10.9.0.1/24 dev rvc &&
	ip link set rvc up && ip link set rvd up

# (a) rrxe first, with devices on eth0 and on a veth: rdma_rxe cannot load.
check "link-add" rdma_up
add_link() { rdma link add "$1" type "$2" netdev "$3" && wait_port_active "$1"; }
check "link-add-veth" add_link rrxe1 rrxe rva
check "rdma_rxe-refused" fails_with "Device or resource busy" modprobe rdma_rxe
check "rdma_rxe-refused-logged" logged "rrxe: refusing to load rdma_rxe while rrxe devices exist"
check "rdma_rxe-not-loaded" not loaded rdma_rxe
# What rdma_rxe's notifier reacted to: MTU change, link down, carrier loss.
netdev_events() {
	ip link set eth0 mtu 1400 && ip link set eth0 down && ip link set eth0 up &&
		ip link set eth0 mtu 1500 && ip link set rvb down && ip link set rvb up &&
		retry 20 active "$IBDEV" && retry 20 active rrxe1
}
check "netdev-events" netdev_events
check "rrxe-pingpong" pingpong "$IBDEV" "$MY_IP"

# (a') rrxe loaded without devices: rdma_rxe loads, rrxe adds no device.
check "link-delete" rdma link delete "$IBDEV"
check "link-delete-veth" rdma link delete rrxe1
check "rdma_rxe-loads" modprobe rdma_rxe
check "link-add-refused" fails_with "Device or resource busy" \
	rdma link add "$IBDEV" type rrxe netdev eth0
check "link-add-refused-logged" logged "rrxe: cannot add $IBDEV while rdma_rxe is loaded"
# (Had the add succeeded, rxe0 could not bind UDP 4791 below.)
rdma link delete "$IBDEV" 2>/dev/null

# (b) rdma_rxe with a device: unloading rrxe leaves it alone, and an rrxe
# loaded afterwards (here by `rdma link add`'s autoload) adds no device.
check "rxe-link-add" add_link rxe0 rxe rvc
rxe0_intact() { rdma link show | grep -E '^link rxe0/1 state ACTIVE .*netdev rvc' && active rxe0; }
check "rrxe-unload" modprobe -r rrxe
check "rrxe-unload-keeps-rxe0" rxe0_intact
check "autoloaded-link-add-refused" fails_with "Device or resource busy" \
	rdma link add rrxe1 type rrxe netdev rva
check "autoloaded-link-add-refused-logged" logged "rrxe: cannot add rrxe1 while rdma_rxe is loaded"
check "rrxe-autoloaded" loaded rrxe
check "rrxe-unload-again" modprobe -r rrxe
check "rrxe-unload-again-keeps-rxe0" rxe0_intact
check "rxe-pingpong" pingpong rxe0 10.9.0.1

# (c) Without rdma_rxe, rrxe adds devices again.
check "rxe-link-delete" rdma link delete rxe0
check "rdma_rxe-unload" modprobe -r rdma_rxe
check "link-add-after-rdma_rxe" add_link "$IBDEV" rrxe eth0
no_devices() { ! ls /sys/class/infiniband 2>/dev/null | grep -q .; }
check "unload-with-device" modprobe -r rrxe
check "no-device-left" no_devices
ip link del rva
ip link del rvc
finish
