# RC ping-pong of 1 MiB messages (1024 packets each at the 1024-byte path
# MTU), 200 round trips with data validation, between two VMs on rrxe (the
# done-when of the RC data-path issue; the C driver's 1 MiB ping-pong is not
# run: it would add minutes to every CI run).  It runs on the fast kernel:
# on the debug kernel (KASAN) one round trip takes seconds.
# runs: rrxe@fast

check "link-add-vm$VM" rdma_up
GID=$(gid_index "$IBDEV" "$MY_IP")
port=18600
if [ "$VM" = 1 ]; then
	timeout 900 ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 1048576 -n 200 -p "$port" &
	pid=$!
	retry 30 bash -c "ss -ltnH 'sport = :$port' | grep -q LISTEN"
	barrier pp-1m
	check "rc-pingpong-server-s1048576" wait "$pid"
else
	barrier pp-1m
	check "rc-pingpong-client-s1048576" client_retry 30 timeout 900 \
		ibv_rc_pingpong -d "$IBDEV" -g "$GID" -c -s 1048576 -n 200 -p "$port" "$PEER_IP"
fi
barrier teardown
check "link-delete-vm$VM" rdma link delete "$IBDEV"
finish
