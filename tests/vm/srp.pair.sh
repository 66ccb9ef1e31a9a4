# SRP (SCSI RDMA Protocol) over RoCE between the two VMs: the kernel's LIO
# target with ib_srpt in VM 1 exports a 64 MiB file on tmpfs (fileio
# backstore) and listens on the RDMA CM (ib_srpt's rdma_cm_port); ib_srp in
# VM 2 logs in through its add_target file with dest=IP:port, so the login
# goes through the RDMA CM, as on any RoCE port.  SRP moves SCSI data by
# the target's RDMA WRITE (READ commands) and RDMA READ (WRITE commands)
# into and out of buffers the initiator registers with fast-register MRs,
# and ib_srpt receives its commands through an SRQ.  fio writes the disk
# with O_DIRECT at 4 KiB, 64 KiB and 1 MiB and reads it back with a CRC32C
# verify; the whole disk is written, read back and compared; the target
# then checks that its backing file holds what the initiator wrote (one
# SHA-256).  The port counters must show the data crossed the fabric, and
# the target's configuration and both sides' modules must go away.
# runs: rrxe@fast
# full-runs: rxe@fast rrxe@debug rxe+rrxe@debug
# timeout: 900

M=1048576
SRP_PORT=5555
DISK_MB=64

check "link-add-vm$VM" rdma_up

# srp_errors: neither side logged an SRP or SCSI error.  The target's
# receives flushed when the initiator logs out (status 5, WR_FLUSH_ERR) are
# logged as failures on both drivers, and are not errors.
srp_errors() {
	! dmesg | grep -iE 'ib_srpt?[: ].*(error|fail|reject|flush)|srp.*(reject|timed out)|(sd|scsi) .*(error|timing out|abort)' |
		grep -vE 'ib_srpt receiving failed for ioctx [0-9a-fx]+ with status 5$'
}

if [ "$VM" = 1 ]; then
	# ---- target ------------------------------------------------------------
	check "srpt-loaded" modprobe -a target_core_mod target_core_file ib_srpt
	CFS=/sys/kernel/config/target
	BS=$CFS/core/fileio_0/disk0
	# ib_srpt names a port by its GID 0, as 0x and 32 hex digits; a
	# target port named so takes logins by the initiator port ID
	# (srpt_cm_req_recv; one named by GUID would see every RDMA CM
	# initiator under the target's own IP address).
	PORT_NAME=0x$(tr -d : <"/sys/class/infiniband/$IBDEV/ports/1/gids/0")
	TPG=$CFS/srpt/$PORT_NAME/tpgt_1
	# The initiator's port ID: its extension (0) and its port GUID.
	iport=$(recv_value 300)
	VALUE_PORT=$((VALUE_PORT + 1))
	ACL=$TPG/acls/0x0000000000000000$iport
	target_up() {
		mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
		mkdir -p "$BS" || return 1
		echo "fd_dev_name=/tmp/disk0.img,fd_dev_size=$((DISK_MB * M))" >"$BS/control" || return 1
		echo 1 >"$BS/enable" || return 1
		mkdir -p "$TPG/lun/lun_0" || return 1
		ln -s "$BS" "$TPG/lun/lun_0/disk0" || return 1
		# The LUN is mapped to VM 2's port only.
		mkdir -p "$ACL/lun_0" || return 1
		ln -s "$TPG/lun/lun_0" "$ACL/lun_0/lun_0" || return 1
		echo 1 >"$TPG/enable" || return 1
		echo "$SRP_PORT" >"$CFS/srpt/discovery_auth/rdma_cm_port" || return 1
		retry 30 cm_port_listening "$SRP_PORT"
	}
	check "target-started" target_up
	# The initiator's target port ID must be ib_srpt's service GUID: the
	# node GUID of the device (srpt_add_one).
	check "send-node-guid" send_value "$(tr -d : <"/sys/class/infiniband/$IBDEV/node_guid")"
	barrier srp-target-ready 300
	v=$(recv_value 700)
	VALUE_PORT=$((VALUE_PORT + 1))
	check "target-holds-initiator-data" same_sum "the backing file" "$(sha256sum /tmp/disk0.img | cut -d' ' -f1)" "$v"
	check "target-rc-qps" rc_qp_rts
	barrier srp-target-checked 300
	barrier srp-initiator-done 700
	check "target-no-srp-errors" srp_errors
	srpt_down() {
		echo 0 >"$CFS/srpt/discovery_auth/rdma_cm_port" && lio_down
	}
	check "target-stopped" srpt_down
	# target_core_mod loads the block backstore (target_core_iblock) too.
	check "srpt-unloaded" retry 60 unload_modules ib_srpt target_core_file target_core_iblock target_core_mod
else
	# ---- initiator ---------------------------------------------------------
	check "srp-loaded" modprobe -a ib_srp sd_mod
	# ib_srp's port GUID over RoCE is the interface ID of its GID 0.
	check "send-port-guid" send_value "$(tr -d : <"/sys/class/infiniband/$IBDEV/ports/1/gids/0" | cut -c17-32)"
	guid=$(recv_value 300)
	VALUE_PORT=$((VALUE_PORT + 1))
	barrier srp-target-ready 300
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	ADD=/sys/class/infiniband_srp/srp-$IBDEV-1/add_target
	check "srp-login" retry 30 sh -c "echo id_ext=$guid,ioc_guid=$guid,dest=$PEER_IP:$SRP_PORT >$ADD"
	# The SCSI host ib_srp made, and the disk behind it.
	srp_disk() {
		local h d
		for h in /sys/class/scsi_host/host*; do
			[ "$(cat "$h/proc_name")" = ib_srp ] || continue
			for d in /sys/class/scsi_disk/"${h##*host}":*/device/block/*; do
				[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
			done
		done
		return 1
	}
	check "srp-disk" retry 30 srp_disk
	DISK=$(srp_disk)
	ls /sys/class/srp_remote_ports/
	check "remote-port" bash -c "ls -d /sys/class/srp_remote_ports/port-* >/dev/null"
	# The login went through the RDMA CM, to the target's port.
	check "connected-by-cm" bash -c "rdma res show cm_id | grep -v LISTEN | grep -q 'dst-addr $PEER_IP:$SRP_PORT'"
	check "disk-size" bash -c "[ \$(blockdev --getsize64 $DISK) -eq $((DISK_MB * M)) ]"
	# Three regions of the disk, one per block size.
	off=0
	for bs in 4k 64k 1m; do
		check "fio-verify-$bs" timeout 300 fio --name="v$bs" --filename="$DISK" --offset=$((off * M)) \
			--size=16M --bs="$bs" --rw=randwrite --direct=1 --ioengine=psync \
			--verify=crc32c --do_verify=1 --verify_fatal=1 --output-format=terse --minimal
		off=$((off + 16))
	done
	whole_disk() {
		head -c $((DISK_MB * M)) /dev/urandom >/tmp/disk.img &&
			timeout 300 dd if=/tmp/disk.img of="$DISK" bs=1M oflag=direct status=none &&
			timeout 300 dd if="$DISK" bs=1M iflag=direct status=none | cmp - /tmp/disk.img
	}
	check "whole-disk-write-read" whole_disk
	check "bytes-crossed-fabric" fabric_moved "$sent0" "$rcvd0" 100
	check "initiator-rc-qps" rc_qp_rts
	check "send-disk-sum" send_value "$(sha256sum /tmp/disk.img | cut -d' ' -f1)"
	barrier srp-target-checked 300
	srp_logout() {
		local p
		for p in /sys/class/srp_remote_ports/port-*; do
			[ -e "$p/delete" ] && echo 1 >"$p/delete"
		done
		retry 30 bash -c "! ls -d /sys/class/srp_remote_ports/port-* 2>/dev/null"
	}
	check "srp-logout" srp_logout
	check "initiator-no-srp-errors" srp_errors
	barrier srp-initiator-done 700
	check "srp-unloaded" retry 30 modprobe -r ib_srp
fi
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
