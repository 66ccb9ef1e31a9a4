# UCX (Debian's 1.18) over the driver between the two VMs: ucx_info lists
# the device's port under the rc_verbs and ud_verbs transports, and
# tests/tools/ucp-check (UCP: tagged messages from 1 byte to 4 MiB, eager
# and rendezvous, answered both ways; put and get of ranges of an 8 MiB
# region; 100 fetch-adds, compare-swaps and a swap on a 64-bit word; every
# byte checked by the program, which ucx_perftest never does) runs over
# rc_verbs (ud_verbs only as UCP's auxiliary transport for wire-up) and
# over ud_verbs alone (where UCP emulates put, get and the atomics with
# active messages).  The lanes UCP chose must be on the transport asked
# for and on this device, and the port counters must show the data crossed
# the fabric.  VM 1 serves, VM 2 is the client.  Then Open MPI (Debian's
# 5.0) over UCX's rc_verbs: tests/tools/mpi-check, one rank in each VM
# (point-to-point from 0 bytes to 8 MiB both ways, sendrecv, bcast,
# allreduce, reduce-scatter and allgather, every value checked).
# runs: rrxe@fast
# full-runs: rxe@fast rrxe@debug rxe+rrxe@debug
# tools: ucp-check mpi-check
# timeout: 900

TOOL=/rrxe/in/ucp-check
check "link-add-vm$VM" rdma_up
check "tool-staged" test -x "$TOOL"
# The GID of the VM's IPv4 address, as rdma_cm would take.
GID=$(gid_index "$IBDEV" "$MY_IP")
# UCX 1.18 drops every UD packet received with an IPv4 GID on a device
# other than mlx5: its check of the destination GID takes the IP version
# from the work completion's SL, which only mlx5 sets to the RoCE packet
# type (uct_ud_iface_check_grh, since changed upstream to read it from the
# GRH), so it reads an IPv6 GID out of the IPv4 header, finds none of its
# own and drops the packet — UD wire-up then times out, alike on the C
# driver and rrxe.  The check is off here.
export UCX_UD_ETH_DGID_CHECK=n

check "ucx-info-lists-device" bash -c "ucx_info -d | grep -E '^# *Device: $IBDEV:1\$'"
for tl in rc_verbs ud_verbs; do
	check "ucx-info-$tl" bash -c "ucx_info -d | grep -B1 -A1 -E '^# *Device: $IBDEV:1\$' | grep -E 'Transport: $tl\$'"
done

# ucp_case NAME TRANSPORT UCX_TLS PORT: one run of the program over
# TRANSPORT; its "ok"/"not ok" lines become this suite's cases.
ucp_case() {
	local name=$1 tl=$2 tls=$3 port=$4 out=/tmp/$1.out rc pid sent0 rcvd0
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	export UCX_TLS=$tls UCX_NET_DEVICES=$IBDEV:1 UCX_IB_GID_INDEX=$GID
	if [ "$VM" = 1 ]; then
		timeout -k 5 300 "$TOOL" server "$port" >"$out" 2>&1 &
		pid=$!
		retry 60 tcp_listening "$port" || echo "# $name: server not listening"
		barrier "$name" 120
		wait "$pid"
		rc=$?
	else
		barrier "$name" 120
		timeout -k 5 300 "$TOOL" client "$PEER_IP" "$port" >"$out" 2>&1
		rc=$?
	fi
	unset UCX_TLS UCX_NET_DEVICES UCX_IB_GID_INDEX
	grep -avE '^(not )?ok ' "$out" | cat -v | sed 's/^/    /' | head -n 80
	relay_results "$name" "$out"
	check "$name-exit-vm$VM" test "$rc" -eq 0
	# ucp_ep_print_info's lanes: "lane[N]: K:TRANSPORT/DEVICE:PORT ...".
	check "$name-lanes-on-$tl-vm$VM" grep -E "lane\[[0-9]+\]: +[0-9]+:$tl/$IBDEV:1" "$out"
	# Tagged messages carry 5.2 MB each way, put and get 4.2 MB one way.
	check "$name-bytes-crossed-fabric-vm$VM" fabric_moved "$sent0" "$rcvd0" 8
}
ucp_case ucp-rc rc_verbs "rc_verbs,ud_verbs:aux" 47700
check "ucp-rc-no-ud-lane-vm$VM" bash -c "! grep -E 'lane\[[0-9]+\]: +[0-9]+:ud_verbs' /tmp/ucp-rc.out"
ucp_case ucp-ud ud_verbs ud_verbs 47701
# ---- Open MPI over UCX: tests/tools/mpi-check, one rank per VM ----------
# mpirun in VM 1 starts the daemon of VM 2 through its remote-shell agent;
# the guests have no sshd, so the agent is a small TCP exec service that VM
# 2 runs for the length of the job (it runs what mpirun's launcher would
# hand ssh, through bash, with its output sent back).
EXEC_PORT=47800
# The agent, in both VMs: the daemon mpirun starts in VM 2 looks for it too.
cat >/tmp/rsh-agent <<-'EOF'
	#!/usr/bin/python3
	# rsh-agent HOST CMD...: what ssh would do, through VM 2's exec service.
	import socket, sys
	s = socket.create_connection((sys.argv[1], 47800), timeout=30)
	s.settimeout(None)
	s.sendall((" ".join(sys.argv[2:]) + "\n").encode())
	while True:
	    d = s.recv(65536)
	    if not d:
	        break
	    sys.stdout.buffer.write(d)
	    sys.stdout.flush()
EOF
chmod +x /tmp/rsh-agent
# Each rank takes its own VM's device and GID (the mixed runs have rxe0 in
# one VM and rrxe0 in the other), so mpirun starts this wrapper.
cat >/tmp/mpi-rank <<-EOF
	#!/bin/sh
	export UCX_TLS=rc_verbs,ud_verbs:aux UCX_NET_DEVICES=$IBDEV:1 UCX_IB_GID_INDEX=$GID UCX_UD_ETH_DGID_CHECK=n
	exec /rrxe/in/mpi-check "\$@"
EOF
chmod +x /tmp/mpi-rank
if [ "$VM" = 2 ]; then
	cat >/tmp/exec-server.py <<-'EOF'
		import socket, subprocess, sys
		ls = socket.socket()
		ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		ls.bind(("", int(sys.argv[1])))
		ls.listen(4)
		ls.settimeout(float(sys.argv[2]))
		while True:
		    try:
		        c, _ = ls.accept()
		    except socket.timeout:
		        break
		    f = c.makefile("rb")
		    cmd = f.readline().decode().rstrip("\n")
		    print("exec:", cmd, flush=True)
		    r = subprocess.run(["bash", "-c", cmd], stdin=subprocess.DEVNULL,
		                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
		    print(r.stdout.decode(errors="replace"), "exit:", r.returncode, flush=True)
		    c.sendall(r.stdout)
		    c.close()
	EOF
	# What mpirun --allow-run-as-root allows on its own host, for the
	# daemon it starts here.
	PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		python3 /tmp/exec-server.py "$EXEC_PORT" 300 >/tmp/exec-server.log 2>&1 &
	exec_pid=$!
	retry 30 tcp_listening "$EXEC_PORT" || echo "# exec service not listening"
	barrier mpi-ready 120
	barrier mpi-done 400
	kill "$exec_pid" 2>/dev/null
	cat -v /tmp/exec-server.log | fold -w 200 | sed 's/^/    /' | tail -n 40
else
	printf '%s slots=1\n%s slots=1\n' "$MY_IP" "$PEER_IP" >/tmp/mpi-hosts
	barrier mpi-ready 120
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	export PRTE_MCA_plm_ssh_agent=/tmp/rsh-agent PRTE_MCA_plm_rsh_agent=/tmp/rsh-agent
	export PRTE_MCA_oob_tcp_if_include=eth0 OMPI_MCA_btl_tcp_if_include=eth0
	timeout -k 5 300 mpirun --allow-run-as-root -np 2 --hostfile /tmp/mpi-hosts --map-by node \
		--mca pml ucx --mca btl self /tmp/mpi-rank >/tmp/mpi.out 2>&1
	rc=$?
	grep -avE '^(not )?ok ' /tmp/mpi.out | cat -v | sed 's/^/    /' | tail -n 60
	relay_results mpi /tmp/mpi.out
	check "mpi-exit" test "$rc" -eq 0
	check "mpi-both-ranks-reported" bash -c "grep -c '^ok allgather-rank[01]\$' /tmp/mpi.out | grep -qx 2"
	check "mpi-bytes-crossed-fabric" fabric_moved "$sent0" "$rcvd0" 10
	barrier mpi-done 400
fi

check "no-qps-left-vm$VM" retry 30 bash -c "! rdma res show qp | grep -E 'link $IBDEV/.*type (RC|UD) .*pid'"
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
