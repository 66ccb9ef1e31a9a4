# NVMe over Fabrics on RDMA between the two VMs: kernel consumers of the
# driver on both sides.  VM 1 is the target (nvmet-rdma exporting a brd RAM
# disk, set up through configfs), VM 2 the host (nvme-rdma with
# register_always=Y: every data transfer goes through a fast-register MR,
# ib_alloc_mr + ib_map_mr_sg + IB_WR_REG_MR, which the target's response
# invalidates with SEND_WITH_INV).  The host writes random data with O_DIRECT
# at 4 KiB (inline in the command), 64 KiB and 1 MiB, also four streams at
# once, reads it back at several sizes and compares it byte for byte; the
# target then checks its RAM disk holds the same SHA-256.  A capture on the
# host shows the target's RDMA READ/WRITE carrying the rkeys the host
# registered and its responses (SEND_ONLY_WITH_INVALIDATE) invalidating
# exactly those rkeys.  A second round reloads the target's RDMA stack with
# ib_core's force_mr=1, so that the target's RDMA READ/WRITE (rdma_rw) also
# go through fast-register MRs of its own, with IB_WR_LOCAL_INV before each
# reuse.  A third round reloads nvmet-rdma with use_srq=1 and srq_size=256,
# the least it takes (ib_core keeps force_mr=1): the target then receives
# every command capsule from one kernel SRQ of the device (ib_create_srq, its
# 256 WQEs posted and, each time one was used, posted again with
# ib_post_srq_recv from the completion handlers); more than 1024 commands at
# 4 KiB and 64 KiB from four streams at once wrap its ring of 512 slots
# twice, the data is compared byte for byte again, and once the host
# disconnects the target's queues drain through the QP's Last WQE Reached
# event (ib_drain_qp waits up to 60 s for it) and go away with the SRQ within
# 30 s.  Teardown: disconnect, configfs removed, the NVMe modules unloaded,
# the RDMA resources back to their counts from before, the link deleted and
# the driver unloaded.
# runs: rrxe@fast
# full-runs: rrxe@debug rxe@fast rxe@debug

NQN=nqn.2026-12.io.rrxe:nvme-pair
PORT=4420
M=1048576
counters() {
	echo "# hw_counters: rdma_sends $(port_counter rdma_sends) rdma_recvs $(port_counter rdma_recvs)" \
		"sent_bytes $(port_counter sent_bytes) rcvd_bytes $(port_counter rcvd_bytes)"
}
t_start=$(date +%s)
phase() { echo "# -- $1 ($(($(date +%s) - t_start)) s)"; }

check "link-add-vm$VM" rdma_up

# The per-device resource summary ("pd N qp N cm_id N mr N ..."), to compare
# after teardown with its count from now.  CQs apart: the NVMe drivers take
# theirs from the device's shared CQ pool (ib_cq_pool_get), which keeps them,
# idle, until the device goes away; only the CQs in use must return to their
# count.
res_summary() { rdma res show 2>/dev/null | grep " $IBDEV:" | sed 's/^[0-9]*: *//; s/ cq [0-9]*//'; }
busy_cqs() { rdma res show cq 2>/dev/null | grep "dev $IBDEV " | grep -vc ' users 0 '; }
res_baseline() {
	res0=$(res_summary) cq0=$(busy_cqs)
	echo "# resources before: $res0, $cq0 CQs in use"
}
res_baseline
# res_back: the summary returns to its count from before within 60 s.
res_back() {
	local n=0
	while { [ "$(res_summary)" != "$res0" ] || [ "$(busy_cqs)" -ne "$cq0" ]; } && [ $n -lt 60 ]; do
		sleep 1
		n=$((n + 1))
	done
	echo "before: $res0, $cq0 CQs in use"
	echo "now:    $(res_summary), $(busy_cqs) CQs in use"
	rdma res show cq | grep "dev $IBDEV "
	[ "$(res_summary)" = "$res0" ] && [ "$(busy_cqs)" -eq "$cq0" ] ||
		{ rdma res show qp; rdma res show mr | head -n 20; return 1; }
}

# kernel_objects KIND MIN PATTERN: rdma res lists at least MIN objects of
# KIND on this device whose line matches the extended regex PATTERN.
kernel_objects() {
	local n
	n=$(rdma res show "$1" 2>/dev/null | grep -E "(dev|link) $IBDEV[ /]" | grep -cE "$3")
	echo "$n $1 matching '$3' on $IBDEV"
	rdma res show "$1" 2>/dev/null | grep -E "(dev|link) $IBDEV[ /]" | grep -E "$3" | head -n 4
	[ "$n" -ge "$2" ]
}

# nvme_errors: the NVMe drivers logged no failed work request, remote
# invalidation of a wrong rkey, error recovery, reconnect or timeout.
nvme_errors() {
	! dmesg | grep -iE 'nvme.*(failed with status|bogus|error recovery|reconnect|MEMREG|LOCAL_INV|INV WR|timeout)|nvmet_rdma.*(failed|error)'
}

if [ "$VM" = 1 ]; then
	# ---- target ----------------------------------------------------------
	CFS=/sys/kernel/config
	SUB=$CFS/nvmet/subsystems/$NQN
	NVPORT=$CFS/nvmet/ports/1
	check "brd-loaded" modprobe brd rd_nr=1 rd_size=65536
	check "nvmet-rdma-loaded" modprobe nvmet-rdma
	mountpoint -q "$CFS" || mount -t configfs configfs "$CFS"
	subsys_setup() {
		mkdir "$SUB" &&
			echo 1 >"$SUB/attr_allow_any_host" &&
			mkdir "$SUB/namespaces/1" &&
			echo -n /dev/ram0 >"$SUB/namespaces/1/device_path" &&
			echo 1 >"$SUB/namespaces/1/enable"
	}
	# port_up: an RDMA port on our address, serving the subsystem; enabling
	# it makes nvmet-rdma listen through the RDMA CM.
	port_up() {
		mkdir "$NVPORT" &&
			echo rdma >"$NVPORT/addr_trtype" &&
			echo ipv4 >"$NVPORT/addr_adrfam" &&
			echo "$MY_IP" >"$NVPORT/addr_traddr" &&
			echo "$PORT" >"$NVPORT/addr_trsvcid" &&
			ln -s "$SUB" "$NVPORT/subsystems/$NQN" || return 1
		retry 10 kernel_objects cm_id 1 "state LISTEN .*comm \\[nvmet_rdma\\]"
	}
	port_down() { rm "$NVPORT/subsystems/$NQN" && rmdir "$NVPORT"; }
	check "nvmet-subsystem" subsys_setup
	check "nvmet-port" port_up
	dmesg | grep -i nvmet | tail -n 3

	# target_round NAME: the host connects, runs its I/O and hands over
	# "MiB SHA-256" of what the namespace should now start with.
	target_round() {
		local r=$1 v mib sum
		phase "round $r: waiting for the host's I/O"
		v=$(recv_value 600)
		VALUE_PORT=$((VALUE_PORT + 1))
		mib=${v%% *} sum=${v#* }
		echo "# host: the first ${mib:-?} MiB have SHA-256 ${sum:-none}"
		ramdisk_sum() {
			local mine
			mine=$(dd if=/dev/ram0 bs=1M count="$mib" iflag=direct status=none | sha256sum | cut -d' ' -f1)
			echo "ram0: $mine"
			echo "host: $sum"
			[ -n "$sum" ] && [ "$mine" = "$sum" ]
		}
		check "$r-ramdisk-holds-host-data" ramdisk_sum
		# Its objects: a PD of its own, an RC QP and a connected cm_id per
		# queue (admin + I/O; the RDMA CM creates the QPs).
		check "$r-target-kernel-pd" kernel_objects pd 1 "comm \\[nvmet_rdma\\]"
		check "$r-target-kernel-qps" kernel_objects qp 2 "type RC state RTS .*comm \\[rdma_cm\\]"
		check "$r-target-kernel-cm-ids" kernel_objects cm_id 2 "state CONNECT .*comm \\[nvmet_rdma\\]"
		counters
	}
	barrier target-ready 300
	target_round sge
	check "sge-target-no-nvme-errors" nvme_errors
	barrier sge-checked 300
	barrier sge-disconnected 300

	# Round 2: the whole RDMA stack again, ib_core with force_mr=1 (a
	# parameter read only at load).
	check "nvmet-port-removed" port_down
	# unload_tree MOD: unload MOD and, first, every module using it.
	unload_tree() {
		local h
		for h in /sys/module/"$1"/holders/*; do
			[ -e "$h" ] || continue
			unload_tree "${h##*/}" || return 1
		done
		timeout 60 rmmod "$1"
	}
	stack_down() {
		timeout 60 modprobe -r nvmet-rdma &&
			rdma link delete "$IBDEV" &&
			unload_tree ib_core || { lsmod; return 1; }
		! [ -d /sys/module/ib_core ]
	}
	check "rdma-stack-unloaded" stack_down
	check "ib-core-force-mr" modprobe ib_core force_mr=1
	check "link-add-again" rdma_up
	res_baseline
	check "nvmet-rdma-reloaded" modprobe nvmet-rdma
	check "nvmet-port-again" port_up
	barrier mr-target-ready 300
	target_round mr
	# rdma_rw's MR pool: fast-register MRs of the target's PD, mapped.
	check "mr-target-kernel-mrs" kernel_objects mr 1 "mrlen [1-9][0-9]* .*comm \\[nvmet_rdma\\]"
	check "mr-target-no-nvme-errors" nvme_errors
	barrier mr-checked 300
	barrier mr-disconnected 300

	# Round 3: nvmet-rdma again with use_srq=1 (a parameter read only at
	# load) and its smallest SRQ; the RDMA stack stays as round 2 left it.
	check "nvmet-port-removed-for-srq" port_down
	check "nvmet-rdma-unloaded-for-srq" timeout 60 modprobe -r nvmet-rdma
	check "nvmet-rdma-use-srq" modprobe nvmet-rdma use_srq=1 srq_size=256
	check "use-srq-set" grep -qx Y /sys/module/nvmet_rdma/parameters/use_srq
	check "nvmet-port-srq" port_up
	barrier srq-target-ready 300
	target_round srq
	# One SRQ of the target's (nvmet-rdma makes one per completion vector),
	# its queues' QPs attached to it (lqpn).
	check "srq-target-kernel-srq" kernel_objects srq 1 "lqpn.*comm \\[nvmet_rdma\\]"
	check "srq-not-refused" bash -c "! dmesg | grep -i 'SRQ requested but not supported'"
	check "srq-target-no-nvme-errors" nvme_errors
	barrier srq-checked 300
	barrier srq-host-disconnected 300
	# The host is gone: each queue's release drains its QP (ib_drain_qp,
	# which waits for IB_EVENT_QP_LAST_WQE_REACHED), then the device's SRQ
	# goes with the last queue.
	srq_queues_gone() {
		local q s
		q=$(rdma res show qp 2>/dev/null | grep -E "(dev|link) $IBDEV[ /]" | grep -c "type RC")
		s=$(rdma res show srq 2>/dev/null | grep -cE "(dev|link) $IBDEV[ /]")
		echo "$q RC QPs, $s SRQs on $IBDEV"
		[ "$q" -eq 0 ] && [ "$s" -eq 0 ]
	}
	check "srq-target-queues-released-30s" retry 30 srq_queues_gone
	barrier srq-disconnected 300

	# Teardown.
	check "nvmet-port-removed-again" port_down
	subsys_down() {
		echo 0 >"$SUB/namespaces/1/enable" &&
			rmdir "$SUB/namespaces/1" &&
			rmdir "$SUB"
	}
	check "nvmet-subsystem-removed" subsys_down
	check "nvmet-unloaded" timeout 60 modprobe -r nvmet-rdma nvmet
	check "brd-unloaded" modprobe -r brd
	check "target-resources-back" res_back
else
	# ---- host ------------------------------------------------------------
	check "nvme-rdma-loaded" modprobe nvme-rdma
	check "register-always" grep -qx Y /sys/module/nvme_rdma/parameters/register_always
	head -c 16M /dev/urandom >/tmp/a
	head -c 16M /dev/urandom >/tmp/b
	head -c 4M /dev/urandom >/tmp/c

	discover() {
		local out
		out=$(timeout 60 nvme discover -t rdma -a "$PEER_IP" -s "$PORT") || { echo "$out"; return 1; }
		echo "$out" | grep -E 'trtype|subnqn|traddr'
		echo "$out" | grep -q "subnqn: *$NQN"
	}
	# find_ns: the block device of the namespace of our subsystem.
	find_ns() { nvme_find_ns "$NQN"; }
	ns_ok() {
		[ -n "$DEV" ] || { ls /sys/class/nvme /sys/block; return 1; }
		echo "$DEV: $(cat "/sys/block/${DEV#/dev/}/size") sectors"
		[ "$(cat "/sys/block/${DEV#/dev/}/size")" -eq 131072 ]
	}
	# connect R: discover the subsystem, connect to it, find its namespace.
	# A short controller-loss timeout: a broken connection fails the I/O
	# within a minute instead of leaving dd waiting for reconnects.
	connect() {
		phase "round $1: discover and connect"
		check "$1-nvme-discover" retry 60 discover
		check "$1-nvme-connect" timeout 120 nvme connect -t rdma -n "$NQN" -a "$PEER_IP" -s "$PORT" \
			--ctrl-loss-tmo=30 --reconnect-delay=5
		retry 30 find_ns >/dev/null
		DEV=$(find_ns)
		check "$1-namespace-64MiB" ns_ok
		dmesg | grep -E 'nvme nvme[0-9]+:' | tail -n 3
	}
	# disconnect R: disconnect, and the namespace goes away.
	disconnect() {
		check "$1-nvme-disconnect" timeout 120 nvme disconnect -n "$NQN"
		check "$1-namespace-gone" retry 30 bash -c "! test -b '$DEV'"
	}

	# wr FILE OFF LEN BS: write FILE's bytes [OFF, OFF+LEN) to the same place
	# on the namespace, BS at a time, with O_DIRECT.
	wr() {
		timeout 300 dd if="$1" of="$DEV" bs="$4" skip=$(($2 / $4)) seek=$(($2 / $4)) \
			count=$(($3 / $4)) oflag=direct status=none
	}
	# rd_cmp FILE OFF LEN BS: read [OFF, OFF+LEN) back BS at a time with
	# O_DIRECT and compare it with FILE's bytes there.
	rd_cmp() {
		local out=/tmp/rd.$2.$4 rc
		timeout 300 dd if="$DEV" of="$out" bs="$4" skip=$(($2 / $4)) count=$(($3 / $4)) \
			iflag=direct status=none || return 1
		cmp -n "$3" -i "0:$2" "$out" "$1"
		rc=$?
		rm -f "$out"
		return $rc
	}
	# parallel CMD FILE OFF LEN BS: CMD on 4 consecutive quarters of
	# [OFF, OFF+LEN) at once.
	parallel() {
		local cmd=$1 f=$2 off=$3 q=$(($4 / 4)) bs=$5 i pids=() rc=0
		for i in 0 1 2 3; do
			$cmd "$f" $((off + i * q)) "$q" "$bs" &
			pids+=($!)
		done
		for i in "${pids[@]}"; do wait "$i" || rc=1; done
		return $rc
	}

	# ---- round 1: the target's RDMA READ/WRITE on plain SGE lists.
	barrier target-ready 300
	connect sge
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	phase "round sge: I/O"
	# Pattern a over the whole 16 MiB in 1 MiB writes (RDMA READ by the
	# target), read back in 1 MiB reads (RDMA WRITE by the target).
	check "sge-write-1M" wr /tmp/a 0 $((16 * M)) $M
	check "sge-read-1M-cmp" rd_cmp /tmp/a 0 $((16 * M)) $M
	# Pattern b over it, at other sizes: 4 KiB (inline data in the command
	# capsule, no MR for writes), 64 KiB, 1 MiB in four streams at once.
	check "sge-write-4k" wr /tmp/b 0 $M 4096
	check "sge-write-64k" wr /tmp/b $M $((3 * M)) 65536
	check "sge-write-1M-4-streams" parallel wr /tmp/b $((4 * M)) $((12 * M)) $M
	check "sge-read-4k-cmp" rd_cmp /tmp/b 0 $M 4096
	check "sge-read-64k-cmp" rd_cmp /tmp/b $M $((3 * M)) 65536
	check "sge-read-256k-4-streams-cmp" parallel rd_cmp /tmp/b $((4 * M)) $((12 * M)) 262144
	check "sge-read-1M-all-cmp" rd_cmp /tmp/b 0 $((16 * M)) $M
	phase "round sge: I/O done"
	# O_DIRECT: every byte crossed the fabric (16 + 16 MiB written, 16 +
	# 1 + 3 + 12 + 16 MiB read).
	check "sge-bytes-crossed-fabric" fabric_moved "$sent0" "$rcvd0" 32 48

	# The wire: a capture of 1 MiB written and read back at 64 KiB.  Every
	# such I/O goes through a fast-register MR: the target's RDMA READ and
	# WRITE requests carry the host's rkeys (RETH), and its responses are
	# SEND_ONLY_WITH_INVALIDATE naming one of them (IETH).
	cat >/tmp/opcodes.py <<'EOF'
import collections, socket, struct, sys
data = open(sys.argv[1], "rb").read()
target = socket.inet_aton(sys.argv[2])
pos, ops, reth_keys, inv_keys = 24, collections.Counter(), set(), []
while pos + 16 <= len(data):
    incl = struct.unpack_from("<I", data, pos + 8)[0]
    pkt = data[pos + 16:pos + 16 + incl]
    pos += 16 + incl
    if len(pkt) < 34 or pkt[12:14] != b"\x08\x00":
        continue
    ip = pkt[14:]
    ihl = (ip[0] & 15) * 4
    udp = ip[ihl:]
    if ip[9] != 17 or len(udp) < 20 or struct.unpack_from("!H", udp, 2)[0] != 4791:
        continue
    bth = udp[8:]
    op, side = bth[0], "target" if ip[12:16] == target else "host"
    ops[(side, op)] += 1
    if side == "target" and op in (0x06, 0x0A, 0x0C) and len(bth) >= 28:
        reth_keys.add(struct.unpack_from("!I", bth, 20)[0])
    if side == "target" and op in (0x16, 0x17) and len(bth) >= 16:
        inv_keys.append(struct.unpack_from("!I", bth, 12)[0])
names = {0x04: "SEND_ONLY", 0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE", 0x08: "WRITE_LAST",
         0x0A: "WRITE_ONLY", 0x0C: "READ_REQUEST", 0x0D: "READ_RESP_FIRST",
         0x0E: "READ_RESP_MIDDLE", 0x0F: "READ_RESP_LAST", 0x10: "READ_RESP_ONLY",
         0x11: "ACK", 0x16: "SEND_LAST_INV", 0x17: "SEND_ONLY_INV"}
for (side, op), n in sorted(ops.items()):
    print(f"{side:6} -> {names.get(op, hex(op)):17} {n}")
count = lambda side, *o: sum(ops[(side, x)] for x in o)
checks = {
    "target RDMA READ requests": count("target", 0x0C) >= 16,
    "host READ responses": count("host", 0x0D, 0x0E, 0x0F, 0x10) >= 16,
    "target RDMA WRITEs": count("target", 0x06, 0x0A) >= 16,
    "target SEND_WITH_INV responses (>= 32)": count("target", 0x16, 0x17) >= 32,
    "every invalidated rkey was used by a READ/WRITE": bool(inv_keys) and set(inv_keys) <= reth_keys,
    "rkeys vary (one REG_MR per I/O)": len(set(inv_keys)) > 1,
}
print(f"{len(reth_keys)} rkeys in RETHs, {len(set(inv_keys))} distinct rkeys invalidated")
for name, good in checks.items():
    print(("ok:     " if good else "FAILED: ") + name)
sys.exit(0 if all(checks.values()) else 1)
EOF
	tcpdump -i eth0 -s 96 -B 8192 -U -Z root -w /tmp/nvme.pcap udp port 4791 2>/tmp/tcpdump.err &
	tcpdump_pid=$!
	retry 10 grep -q "listening on" /tmp/tcpdump.err
	check "sge-captured-write-64k" wr /tmp/b 0 $M 65536
	check "sge-captured-read-64k-cmp" rd_cmp /tmp/b 0 $M 65536
	sleep 1
	kill "$tcpdump_pid"
	wait "$tcpdump_pid"
	check "sge-wire-reg-mr-and-send-with-inv" python3 /tmp/opcodes.py /tmp/nvme.pcap "$PEER_IP"

	# The kernel objects behind it: nvme-rdma's PD, QPs, cm_ids and its pool
	# of fast-register MRs, some of them mapped (ib_map_mr_sg set a length).
	host_objects() {
		check "$1-host-kernel-pd" kernel_objects pd 1 "comm \\[nvme_rdma\\]"
		check "$1-host-kernel-qps" kernel_objects qp 2 "type RC state RTS .*comm \\[rdma_cm\\]"
		check "$1-host-kernel-cm-ids" kernel_objects cm_id 2 "state CONNECT .*comm \\[nvme_rdma\\]"
		# One MR per request slot: 32 for the admin queue, 128 per I/O queue.
		check "$1-host-kernel-mrs" kernel_objects mr 160 "comm \\[nvme_rdma\\]"
		check "$1-host-mrs-mapped" kernel_objects mr 1 "mrlen [1-9][0-9]* .*comm \\[nvme_rdma\\]"
		counters
		check "$1-host-no-nvme-errors" nvme_errors
	}
	host_objects sge

	# Hand what the namespace should hold to the target.
	sum=$(sha256sum </tmp/b | cut -d' ' -f1)
	check "sge-sum-sent" send_value "16 $sum" 120
	barrier sge-checked 300
	disconnect sge
	barrier sge-disconnected 300

	# ---- round 2: the target's RDMA READ/WRITE through its own MRs.
	barrier mr-target-ready 600
	connect mr
	phase "round mr: I/O"
	# Pattern c over the first 4 MiB: 1 MiB and 64 KiB writes, 256 KiB and
	# 1 MiB reads, 4 KiB reads of its first 256 KiB.
	check "mr-write-1M" wr /tmp/c 0 $((2 * M)) $M
	check "mr-write-64k-4-streams" parallel wr /tmp/c $((2 * M)) $((2 * M)) 65536
	check "mr-read-256k-4-streams-cmp" parallel rd_cmp /tmp/c 0 $((4 * M)) 262144
	check "mr-read-4k-cmp" rd_cmp /tmp/c 0 262144 4096
	check "mr-read-1M-cmp" rd_cmp /tmp/c 0 $((4 * M)) $M
	phase "round mr: I/O done"
	host_objects mr
	sum=$( (cat /tmp/c; tail -c +$((4 * M + 1)) /tmp/b) | sha256sum | cut -d' ' -f1)
	check "mr-sum-sent" send_value "16 $sum" 120
	barrier mr-checked 300
	disconnect mr
	barrier mr-disconnected 300

	# ---- round 3: the target receives from a shared receive queue.
	head -c 4M /dev/urandom >/tmp/d
	barrier srq-target-ready 600
	connect srq
	phase "round srq: I/O"
	# Pattern d over the first 4 MiB: 2 MiB in 4 KiB writes (inline data)
	# and 2 MiB in 64 KiB writes, four streams each; read back in 4 KiB
	# reads from four streams and 1 MiB reads: over 1024 commands, each
	# taking one of the SRQ's 256 WQEs, which is posted again once the
	# command completed.
	check "srq-write-4k-4-streams" parallel wr /tmp/d 0 $((2 * M)) 4096
	check "srq-write-64k-4-streams" parallel wr /tmp/d $((2 * M)) $((2 * M)) 65536
	check "srq-read-4k-4-streams-cmp" parallel rd_cmp /tmp/d 0 $((2 * M)) 4096
	check "srq-read-1M-cmp" rd_cmp /tmp/d 0 $((4 * M)) $M
	phase "round srq: I/O done"
	host_objects srq
	sum=$( (cat /tmp/d; tail -c +$((4 * M + 1)) /tmp/b) | sha256sum | cut -d' ' -f1)
	check "srq-sum-sent" send_value "16 $sum" 120
	barrier srq-checked 300
	disconnect srq
	barrier srq-host-disconnected 300
	check "nvme-rdma-unloaded" timeout 60 modprobe -r nvme-rdma
	check "host-resources-back" res_back
	barrier srq-disconnected 300
fi

phase "teardown"
barrier teardown 300
check "link-delete-vm$VM" rdma link delete "$IBDEV"
unload() {
	case $DRIVER in rxe) modprobe -r rdma_rxe ;; *) modprobe -r "$DRIVER" ;; esac
}
check "module-unload-vm$VM" unload
phase "done"
finish
