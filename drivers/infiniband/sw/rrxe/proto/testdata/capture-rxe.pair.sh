# SPDX-License-Identifier: GPL-2.0
#
# How testdata/rxe-c-driver.pcap was made: C-driver (rdma_rxe) RoCEv2 traffic
# between the two test VMs, captured on VM 1's eth0, for the ICRC calibration
# test in icrc.rs (`c_driver_capture`).  Not part of any suite; rerun with
#
#   DRIVER=rxe VM_MEM=1024 qemu/run-pair \
#       drivers/infiniband/sw/rrxe/proto/testdata/capture-rxe.pair.sh \
#       drivers/infiniband/sw/rrxe/proto/testdata/capture-rxe.pair.sh
#
# and copy results/latest/vm1/out/roce.pcap over the test file.
check "link-add-vm$VM" rdma_up
GID4=$(gid_index "$IBDEV" "$MY_IP")
if [ "$VM" = 1 ]; then
	tcpdump -i eth0 -s 0 -U -w /rrxe/out/roce.pcap udp port 4791 >/dev/null 2>&1 &
	tpid=$!
	sleep 2
fi
run_pair() { # NAME PORT CMD...
	local name=$1 port=$2
	shift 2
	if [ "$VM" = 1 ]; then
		timeout 120 "$@" -p "$port" &
		local pid=$!
		sleep 3
		barrier "$name"
		check "$name-server" wait "$pid"
	else
		barrier "$name"
		sleep 1
		check "$name-client" timeout 120 "$@" -p "$port" "$PEER_IP"
	fi
}
run_pair rc4 18515 ibv_rc_pingpong -d "$IBDEV" -g "$GID4" -c -s 1030 -m 1024 -n 3
run_pair rc6 18516 ibv_rc_pingpong -d "$IBDEV" -g 0 -c -s 13 -n 2
run_pair ud4 18517 ibv_ud_pingpong -d "$IBDEV" -g "$GID4" -s 57 -n 2
run_pair write 18518 ib_write_bw -d "$IBDEV" -x "$GID4" -s 70 -n 5 -F
run_pair read 18519 ib_read_bw -d "$IBDEV" -x "$GID4" -s 2100 -m 1024 -n 5 -F
run_pair atomic 18520 ib_atomic_bw -d "$IBDEV" -x "$GID4" -n 5 -F
run_pair writeimm 18521 ib_send_bw -d "$IBDEV" -x "$GID4" -s 9 -n 5 -F
barrier done
if [ "$VM" = 1 ]; then
	sleep 1
	kill "$tpid"
	wait "$tpid"
	ls -l /rrxe/out/roce.pcap
fi
finish
