# Baseline between two VMs, for any DRIVER: the device comes up on eth0 with
# the RoCEv2 GIDs, RC ping-pong with data validation at three sizes, rping
# with verification, and a clean teardown.  Both VMs run this script; VM 1
# serves, VM 2 is the client.
# runs:
# full-runs: rxe@debug

check "link-add-vm$VM" rdma_up

devinfo_ok() {
	local info
	info=$(ibv_devinfo -v -d "$IBDEV") || return 1
	echo "$info" | grep -E 'hca_id|state:|link_layer|active_mtu|GID\['
	echo "$info" | grep -q 'state:.*PORT_ACTIVE (4)' &&
		echo "$info" | grep -q 'link_layer:.*Ethernet' &&
		echo "$info" | grep -qE "GID\[ *[0-9]+\]:.*::ffff:$MY_IP, RoCE v2" &&
		echo "$info" | grep -qE 'GID\[ *0\]:.*fe80::'
}
check "devinfo-active-vm$VM" devinfo_ok
GID=$(gid_index "$IBDEV" "$MY_IP")

# RC ping-pong with -c (validate the received buffer) at each size.
pp_port=18515
for size in 1 4096 65536; do
	if [ "$VM" = 1 ]; then
		timeout 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s "$size" -n 100 -p "$pp_port" &
		pid=$!
		retry 30 bash -c "ss -ltnH 'sport = :$pp_port' | grep -q LISTEN"
		barrier "pp-$size"
		check "rc-pingpong-server-s$size" wait "$pid"
	else
		barrier "pp-$size"
		check "rc-pingpong-client-s$size" timeout 300 \
			ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s "$size" -n 100 -p "$pp_port" "$PEER_IP"
	fi
	pp_port=$((pp_port + 1))
done

# rping through rdma_cm with payload verification.
if [ "$VM" = 1 ]; then
	timeout 300 rping -s -a "$MY_IP" -V -C 100 -S 4096 &
	pid=$!
	retry 30 bash -c 'rdma res show cm_id | grep -q LISTEN'
	barrier rping
	check "rping-server" wait "$pid"
else
	barrier rping
	check "rping-client" timeout 300 rping -c -a "$PEER_IP" -V -C 100 -S 4096
fi

barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
unload() {
	case $DRIVER in rxe) modprobe -r rdma_rxe ;; *) modprobe -r "$DRIVER" ;; esac
}
check "module-unload-vm$VM" unload
finish
