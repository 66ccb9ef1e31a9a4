# iSER (iSCSI Extensions for RDMA, RFC 7145) between the two VMs: the
# kernel's LIO target in VM 1, set up through configfs, exports a 64 MiB
# file on tmpfs (fileio backstore) on a portal with iSER enabled (ib_isert);
# open-iscsi in VM 2 discovers it over TCP and logs in through its `iser`
# interface (ib_iser), which connects through the RDMA CM.  iSER carries
# the iSCSI PDUs in SENDs and moves the data by the target's RDMA WRITE
# (SCSI READ) and RDMA READ (SCSI WRITE) into and out of buffers the
# initiator registers with fast-register MRs.  fio writes the block device
# with O_DIRECT at 4 KiB, 64 KiB and 1 MiB and reads it back with a CRC32C
# verify; the target then checks that its backing file holds what the
# initiator wrote last (one SHA-256).  The session must be an iSER one, the
# port counters must show the data crossed the fabric, and the target's
# configuration and modules must go away.
# runs: rrxe@fast
# full-runs: rxe@fast rrxe@debug rxe+rrxe@debug
# timeout: 900

M=1048576
IQN=iqn.2026-12.io.rrxe:iser-pair
ISCSI_PORT=3260
DISK_MB=64

check "link-add-vm$VM" rdma_up

# iser_errors: neither side logged an iSER, iSCSI or SCSI error.
iser_errors() {
	! dmesg | grep -iE 'iser.*(error|fail|flush|bad)|isert.*(error|fail)|iscsi.*(error|fail|timed out)|(sd|scsi) .*(error|timing out|abort)'
}

if [ "$VM" = 1 ]; then
	# ---- target ------------------------------------------------------------
	check "lio-loaded" modprobe -a target_core_mod target_core_file iscsi_target_mod ib_isert
	CFS=/sys/kernel/config/target
	BS=$CFS/core/fileio_0/disk0
	TPG=$CFS/iscsi/$IQN/tpgt_1
	NP=$TPG/np/$MY_IP:$ISCSI_PORT
	target_up() {
		mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
		mkdir -p "$BS" || return 1
		echo "fd_dev_name=/tmp/disk0.img,fd_dev_size=$((DISK_MB * M))" >"$BS/control" || return 1
		echo 1 >"$BS/enable" || return 1
		mkdir -p "$TPG/lun/lun_0" || return 1
		ln -s "$BS" "$TPG/lun/lun_0/disk0" || return 1
		mkdir "$NP" || return 1
		# The portal also listens for iSER (through the RDMA CM).
		echo 1 >"$NP/iser" || return 1
		# No CHAP, and any initiator gets the LUN read-write.
		echo 0 >"$TPG/attrib/authentication"
		echo 1 >"$TPG/attrib/generate_node_acls"
		echo 1 >"$TPG/attrib/cache_dynamic_acls"
		echo 0 >"$TPG/attrib/demo_mode_write_protect"
		echo 1 >"$TPG/enable" || return 1
		retry 30 cm_port_listening "$ISCSI_PORT"
	}
	check "target-started" target_up
	rdma res show cm_id | grep -i listen
	barrier iser-target-ready 300
	v=$(recv_value 700)
	VALUE_PORT=$((VALUE_PORT + 1))
	check "target-holds-initiator-data" same_sum "the backing file" "$(sha256sum /tmp/disk0.img | cut -d' ' -f1)" "$v"
	check "target-rc-qps" rc_qp_rts
	barrier iser-target-checked 300
	barrier iser-initiator-done 700
	check "target-no-iser-errors" iser_errors
	check "target-stopped" lio_down
	# target_core_mod loads the block backstore (target_core_iblock) too.
	lio_unload() {
		retry 60 unload_modules ib_isert iscsi_target_mod target_core_file target_core_iblock target_core_mod && return 0
		echo "target_core_mod: refcnt $(cat /sys/module/target_core_mod/refcnt)," \
			"holders: $(ls /sys/module/target_core_mod/holders)"
		find /sys/kernel/config/target -maxdepth 3 -type d | head -n 30
		return 1
	}
	check "lio-unloaded" lio_unload
else
	# ---- initiator ---------------------------------------------------------
	check "iser-loaded" modprobe -a ib_iser sd_mod
	# The root is read-only: open-iscsi's configuration and its node and
	# discovery records go to tmpfs.
	initiator_up() {
		mount -t tmpfs tmpfs /etc/iscsi || return 1
		mount -t tmpfs tmpfs /var/lib/iscsi || return 1
		echo "InitiatorName=iqn.2026-12.io.rrxe:vm2" >/etc/iscsi/initiatorname.iscsi
		cat >/etc/iscsi/iscsid.conf <<-EOF
			node.startup = manual
			node.session.timeo.replacement_timeout = 30
		EOF
		mkdir -p /run/lock/iscsi
		iscsid
	}
	check "iscsid-started" initiator_up
	barrier iser-target-ready 300
	sent0=$(port_counter sent_bytes) rcvd0=$(port_counter rcvd_bytes)
	check "discovery" retry 30 iscsiadm -m discovery -t sendtargets -p "$PEER_IP:$ISCSI_PORT" -I iser
	check "iser-login" timeout 120 iscsiadm -m node -T "$IQN" -p "$PEER_IP:$ISCSI_PORT" -I iser --login
	disk_of_session() { iscsiadm -m session -P 3 | awk '/Attached scsi disk/ { print $4; exit }'; }
	retry 30 bash -c "iscsiadm -m session -P 3 | grep -q 'Attached scsi disk'"
	DISK=/dev/$(disk_of_session)
	iscsiadm -m session -P 3 | grep -E 'Iface Transport|Attached scsi disk|iSCSI Session State'
	check "session-is-iser" bash -c "iscsiadm -m session -P 3 | grep -E 'Iface Transport: *iser'"
	check "disk-size" bash -c "[ \$(blockdev --getsize64 $DISK) -eq $((DISK_MB * M)) ]"
	# Three regions of the disk, one per block size; the last pass writes
	# the whole disk so that the target can check all of it.
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
	barrier iser-target-checked 300
	check "iser-logout" timeout 120 iscsiadm -m node -T "$IQN" -p "$PEER_IP:$ISCSI_PORT" -I iser --logout
	check "initiator-no-iser-errors" iser_errors
	check "iscsid-stopped" bash -c "iscsiadm -k 0 && umount /etc/iscsi /var/lib/iscsi"
	barrier iser-initiator-done 700
	check "iser-unloaded" retry 30 modprobe -r ib_iser
fi
check "link-delete-vm$VM" timeout 60 rdma link delete "$IBDEV"
finish
