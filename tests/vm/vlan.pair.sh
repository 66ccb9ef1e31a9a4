# RoCE over a VLAN: both VMs put VLAN 100 (eth0.100, 10.100.0.VM/24) over
# eth0, and the device is bound to eth0 (the real device, as `rdma link add`
# requires).  The RDMA core adds the VLAN's addresses to the device's GID
# table with the VLAN device as their net device; traffic that uses one of
# those GIDs must leave through the VLAN device, tagged, and come back
# through it.  Checked: the VLAN GID and its net device; a data-checked
# ibv_rc_pingpong and ibv_ud_pingpong between the VLAN GIDs, with the VLAN
# device's own packet counters on both sides moving by at least the packets
# the ping-pong exchanged (an untagged packet is counted on eth0 only); and
# rping between the VLAN addresses, which needs the connection manager's
# MADs on QP1 to complete with the VLAN id (IB_WC_WITH_VLAN: the passive
# side finds the GID of its reply from it, ib_init_ah_attr_from_wc).
# runs: rrxe@debug
# full-runs: rxe@fast rxe+rrxe@debug rrxe+rxe@debug
# timeout: 900

VID=100
VDEV=eth0.$VID
VIP=10.100.0.$VM
VPEER=10.100.0.$((3 - VM))
vlan_up() {
	ip link add link eth0 name "$VDEV" type vlan id "$VID" &&
		ip addr add "$VIP/24" dev "$VDEV" &&
		ip link set "$VDEV" up
}
check "vlan-up-vm$VM" vlan_up
check "link-add-vm$VM" rdma_up
check "vlan-gid-vm$VM" retry 20 gid_index "$IBDEV" "$VIP"
VGID=$(gid_index "$IBDEV" "$VIP")
GID=$(gid_index "$IBDEV" "$MY_IP")
echo "# GID $GID for $MY_IP, GID $VGID for $VIP"
gid_ndev() { cat "/sys/class/infiniband/$IBDEV/ports/1/gid_attrs/ndevs/$1"; }
check "vlan-gid-ndev-vm$VM" bash -c "[ \"\$(cat /sys/class/infiniband/$IBDEV/ports/1/gid_attrs/ndevs/$VGID)\" = $VDEV ]"
check "peer-reachable-on-vlan" retry 30 ping -c 1 -W 1 "$VPEER"

STATS=/sys/class/net/$VDEV/statistics
vstat() { cat "$STATS/$1"; }
# vlan_moved WHAT BEFORE MIN: the VLAN device's counter moved by MIN.
vlan_moved() {
	local d=$(($(vstat "$1") - $2))
	echo "$VDEV $1 +$d (at least $3)"
	[ "$d" -ge "$3" ]
}

port=18800
# pair NAME SECONDS COMMAND...: VM 1 serves, VM 2 connects to VM 1's VLAN
# address; both checked.
pair() {
	local name=$1 secs=$2 pid
	shift 2
	if [ "$VM" = 1 ]; then
		timeout "$secs" "$@" -p "$port" &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
		barrier "$name"
		check "$name-server" wait "$pid"
	else
		barrier "$name"
		check "$name-client" client_retry 30 timeout "$secs" "$@" -p "$port" "$VPEER"
	fi
	port=$((port + 1))
}

# 200 round trips of 4 KiB (4 packets each way at the 1 KiB path MTU, plus
# ACKs): each side receives at least 800 packets on the VLAN device.
rx0=$(vstat rx_packets) tx0=$(vstat tx_packets)
pair rc-pingpong-vlan 600 ibv_rc_pingpong -d "$IBDEV" -g "$VGID" -c -s 4096 -n 200
check "rc-vlan-rx-counted-vm$VM" vlan_moved rx_packets "$rx0" 800
check "rc-vlan-tx-counted-vm$VM" vlan_moved tx_packets "$tx0" 800

rx0=$(vstat rx_packets)
pair ud-pingpong-vlan 600 ibv_ud_pingpong -d "$IBDEV" -g "$VGID" -c -s 512 -n 200
check "ud-vlan-rx-counted-vm$VM" vlan_moved rx_packets "$rx0" 200

# rping over the VLAN addresses: rdma_cm resolves the VLAN device, the CM's
# REQ/REP/RTU travel on QP1 through it.
rx0=$(vstat rx_packets)
serve_case "data mismatch|error|fail" 1 rping-vlan 300 "listening rping" \
	"rping -s -a $VIP -V -C 20 -S 4096" \
	"rping -c -a $VPEER -V -C 20 -S 4096"
check "rping-vlan-rx-counted-vm$VM" vlan_moved rx_packets "$rx0" 40

# The untagged GID still works beside it.
port=$((port + 10))
if [ "$VM" = 1 ]; then
	timeout 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 4096 -n 50 -p "$port" &
	pid=$!
	retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
	barrier rc-untagged
	check "rc-pingpong-untagged-server" wait "$pid"
else
	barrier rc-untagged
	check "rc-pingpong-untagged-client" client_retry 30 timeout 300 \
		ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 4096 -n 50 -p "$port" "$PEER_IP"
fi
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
