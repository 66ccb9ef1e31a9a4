# The main job (`make run`): both VMs bring up the selected driver on eth0,
# then rping and ibv_rc_pingpong run between them with data verification.
# Runs in both VMs of qemu/run-pair: VM 1 serves, VM 2 is the client.
check "link-add-vm$VM" rdma_up
ibv_devinfo -d "$IBDEV" | grep -E 'hca_id|state|link_layer|active_mtu'
GID=$(gid_index "$IBDEV" "$MY_IP")
echo "GID index $GID: $(cat /sys/class/infiniband/$IBDEV/ports/1/gids/$GID)"

if [ "$VM" = 1 ]; then
	timeout 300 rping -s -a "$MY_IP" -v -V -C 10 -S 64 &
	pid=$!
	retry 30 bash -c 'rdma res show cm_id | grep -q LISTEN'
	barrier rping
	check "rping-server" wait "$pid"
	timeout 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 4096 -n 200 &
	pid=$!
	retry 30 bash -c "ss -ltnH 'sport = :18515' | grep -q LISTEN"
	barrier pingpong
	check "rc-pingpong-server" wait "$pid"
else
	barrier rping
	check "rping-client" timeout 300 rping -c -a "$PEER_IP" -v -V -C 10 -S 64
	barrier pingpong
	check "rc-pingpong-client" timeout 300 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 4096 -n 200 "$PEER_IP"
fi
finish
