# SPDX-License-Identifier: GPL-2.0
# nvme-cli against rnvme: /dev/rnvme0 and its namespaces beside the C driver's /dev/nvme0 on
# an identical emulated controller (two controllers, two image namespaces each). Outputs
# are compared with what QEMU was given and with what nvme-cli reads through the C driver.
# Then the ioctl edge cases, a bounded fuzz, and unbind with open files (nvme-ioctl).
# Environment: FUZZ_N (random ioctls, default 3000).
. /guest/lib.sh
FUZZ_N=${FUZZ_N:-3000}

# --- bad module parameters: insmod fails and the log names the parameter ---------------
for bad in io_queue_depth=1 io_queue_depth=5000 io_timeout=0 admin_timeout=4000 \
	io_queues=70000 poll_queues=2000 write_queues=2000 probe_fault_step=99; do
	dmesg -c >/dev/null
	name=${bad%%=*}
	if insmod /lib/rnvme.ko "$bad" 2>/dev/null; then
		fail "param_${bad}_rejected" "insmod succeeded"
		rmmod rnvme
	elif dmesg | grep -q "$bad is out of range"; then
		pass "param_${bad}_rejected"
	else
		fail "param_${bad}_rejected" "no message naming $name: $(dmesg | tail -2 | tr '\n' ' ')"
	fi
done

assign_drivers rnvme nvme
# Both drivers ignore the namespace identifiers of QEMU's controller ID (quirk bogus_nid,
# from days when QEMU gave every namespace the same ones); with the quirk off, they read
# what QEMU is given here, and the identifiers below compare the two drivers' handling of
# them.
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko quirks=1b36:0010:^bogus_nid
if insmod /lib/rnvme.ko quirks=1b36:0010:^bogus_nid; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_disks /dev/rnvme0n2
require_disk c_driver_disks /dev/nvme0n2
R=/dev/rnvme0 C=/dev/nvme0 S=/sys/class/misc/rnvme0 CS=/sys/class/nvme/nvme0
PCI=$(bound_to rnvme | head -1)
# as_c NAME C-ANSWER RNVME-ANSWER PATTERN: rnvme's answer is C's, and matches PATTERN (a
# case pattern: what the device must give), so that the same failure on both does not pass.
as_c() {
	case "$3" in
	$4) expect_eq "$1" "$2" "$3" ;;
	*) fail "$1" "got '$3' (C: '$2'), not $4" ;;
	esac
}

# --- character device and sysfs --------------------------------------------------------
expect_eq chardev_root_only "crw-------" "$(ls -l $R | cut -c1-10)"
expect_eq sysfs_model "QEMU NVMe Ctrl" "$(cat $S/model)"
expect_eq sysfs_serial rnvme-s0 "$(cat $S/serial)"
# The C driver keeps the field's padding; rnvme trims it. QEMU's firmware revision is its
# version (7.2.x).
as_c sysfs_firmware_rev_as_c_driver "$(sed 's/ *$//' $CS/firmware_rev)" "$(cat $S/firmware_rev)" \
	'[0-9]*.[0-9]*'
expect_eq sysfs_state live "$(cat $S/state)"
# The admin queue and an I/O queue per possible CPU (C's nvme_max_io_queues), at most QEMU's
# 64 queue pairs.
cpus=$(awk -F, '{ for (i = 1; i <= NF; i++) { n = split($i, r, "-"); s += n > 1 ? r[2] - r[1] + 1 : 1 } }
	END { print s }' /sys/devices/system/cpu/possible)
nq=$(((cpus < 64 ? cpus : 64) + 1))
expect_eq sysfs_queue_count_as_c_driver "$nq $nq" "$(cat $CS/queue_count) $(cat $S/queue_count)"
# QEMU gives a controller outside an NVM subsystem controller id 0.
expect_eq sysfs_cntlid_as_c_driver "0 0" "$(cat $CS/cntlid) $(cat $S/cntlid)"
expect_eq sysfs_device_is_the_controller "$PCI" "$(basename "$(readlink -f $S/device)")"

# --- namespace identifiers in sysfs -------------------------------------------------------
# Each disk's wwid, uuid, nguid, eui, csi and nsid as the C driver shows them for the same
# namespace of its identical controller (files C hides, rnvme must hide too): namespace 1
# has a UUID and an EUI64 (wwid uuid.), namespace 2 an EUI64 only (wwid eui.).
# C names its disks in the order its parallel scan found them, not by namespace id: find
# its disk of namespace n by the nsid file.
c_disk() {
	for f in /sys/block/nvme0n*/nsid; do
		[ "$(cat "$f" 2>/dev/null)" = "$1" ] && echo "${f%/nsid}" && return
	done
}
# ns_want N ATTR: what QEMU was given (scripts/test.sh), as C shows it: no NGUID (QEMU 7.2
# has none), so C hides nguid, and namespace 2's uuid (shown if it or the NGUID is set).
ns_want() {
	case $1:$2 in
	1:wwid) echo "uuid.${NS1_UUID:-unset}" ;;
	1:uuid) echo "${NS1_UUID:-unset}" ;;
	1:eui) echo "52 54 00 00 00 c0 ff ee" ;;
	2:wwid) echo eui.52540000000beef2 ;;
	2:eui) echo "52 54 00 00 00 0b ee f2" ;;
	*:csi) echo 0 ;;
	*:nsid) echo "$1" ;;
	*) echo absent ;;
	esac
}
for n in 1 2; do
	cd_n=$(c_disk $n)
	for a in wwid uuid nguid eui csi nsid; do
		c=$(cat "${cd_n:-/nonexistent}/$a" 2>/dev/null || echo absent)
		r=$(cat /sys/block/rnvme0n$n/$a 2>/dev/null || echo absent)
		w=$(ns_want $n $a)
		expect_eq "ns${n}_${a}_as_c_driver" "$w|$w" "$c|$r"
	done
done
# And what QEMU was given, so the comparison is not between two empty answers.
expect_eq ns1_wwid_is_the_uuid "uuid.${NS1_UUID:-unset}" "$(cat /sys/block/rnvme0n1/wwid)"
expect_eq ns1_eui_is_the_eui64 "52 54 00 00 00 c0 ff ee" "$(cat /sys/block/rnvme0n1/eui)"
expect_eq ns2_wwid_is_the_eui64 "eui.52540000000beef2" "$(cat /sys/block/rnvme0n2/wwid)"
# The controller's serial and model on the disk (for udev: C's rules read them from the
# disk's parent, the controller device).
expect_eq disk_serial_is_the_controllers "$(cat $S/serial)" "$(cat /sys/block/rnvme0n1/serial)"
expect_eq disk_model_is_the_controllers "$(cat $S/model)" "$(cat /sys/block/rnvme0n1/model)"

# --- udev: /dev/disk/by-id links ------------------------------------------------------------
# The udev package's udevadm applies udev/60-rnvme.rules to rnvme's disks and Debian's
# 60-persistent-storage.rules to C's: the same by-id link names (the two controllers differ
# only in serial number, set aside), and each of rnvme's links (udevadm test makes them)
# leads to its disk.
mkdir -p /etc/udev/rules.d && cp /guest/udev/60-rnvme.rules /etc/udev/rules.d/
# by_id DISK SERIAL: the disk's by-id links, the serial number replaced by SERIAL.
by_id() {
	udevadm test --action=add "/sys/block/$1" 2>/dev/null | sed -n 's/^DEVLINKS=//p' |
		tr ' ' '\n' | grep /disk/by-id/ | sed "s/$2/SERIAL/" | sort
}
for n in 1 2; do
	links=$(by_id rnvme0n$n "$(cat $S/serial)")
	echo "rnvme0n$n by-id:" $links
	count=$(echo "$links" | grep -c by-id)
	[ "$count" -ge 3 ] && pass "ns${n}_by_id_links" || fail "ns${n}_by_id_links" "$links"
	bad=""
	for l in $links; do
		l=$(echo "$l" | sed "s/SERIAL/$(cat $S/serial)/")
		[ "$(readlink -f "$l")" = /dev/rnvme0n$n ] || bad="$bad $l"
	done
	[ -z "$bad" ] && pass "ns${n}_by_id_links_lead_to_the_disk" ||
		fail "ns${n}_by_id_links_lead_to_the_disk" "$bad"
	cd_n=$(c_disk $n)
	# Among them the one of the namespace's wwid (Debian's rules: nvme-$attr{wwid}).
	as_c "ns${n}_by_id_links_as_c" \
		"$(by_id "$(basename "${cd_n:-none}")" "$(sed 's/ *$//' $CS/serial)")" "$links" \
		"*/disk/by-id/nvme-$(ns_want $n wwid)*"
done

# field DEV-OUTPUT KEY: the value of "KEY : value" lines of nvme-cli's plain output.
field() { echo "$1" | sed -n "s/^$2[[:space:]]*: *//p" | sed 's/[[:space:]]*$//' | head -1; }

# --- id-ctrl ---------------------------------------------------------------------------
rid=$(nvme id-ctrl $R) || fail id_ctrl "nvme id-ctrl $R failed"
cid=$(nvme id-ctrl $C)
expect_eq id_ctrl_sn rnvme-s0 "$(field "$rid" sn)"
expect_eq id_ctrl_mn "QEMU NVMe Ctrl" "$(field "$rid" mn)"
expect_eq id_ctrl_fr_matches_sysfs "$(cat $S/firmware_rev)" "$(field "$rid" fr)"
# Each a number (nvme-cli prints decimal or 0x...), not two empty fields.
for f in vid ssvid mdts ver oacs acl aerl frmw lpa elpe sqes cqes nn oncs vwc sgls; do
	as_c "id_ctrl_${f}_as_c_driver" "$(field "$cid" $f)" "$(field "$rid" $f)" '[0-9]*'
done

# --- id-ns, list-ns, get-ns-id -----------------------------------------------------------
for n in 1 2; do
	rns=$(nvme id-ns ${R}n$n) || fail "id_ns_$n" "nvme id-ns ${R}n$n failed"
	cns=$(nvme id-ns ${C}n$n)
	# 64 MiB of 512-byte blocks.
	expect_eq "id_ns_${n}_nsze" 0x20000 "$(field "$rns" nsze)"
	for f in ncap nlbaf flbas nsfeat dlfeat "lbaf  0"; do
		# Numbers; NCAP the size (no thin provisioning), format 0 of 512-byte blocks in use.
		case $f in ncap) w=0x20000 ;; lbaf*) w='*lbads:9*in use*' ;; *) w='[0-9]*' ;; esac
		as_c "id_ns_${n}_${f// /}_as_c_driver" "$(field "$cns" "$f")" "$(field "$rns" "$f")" "$w"
	done
done
expect_eq id_ns_through_chardev "$(nvme id-ns ${R}n2 | sed 1d)" "$(nvme id-ns $R -n 2 | sed 1d)"
expect_eq list_ns "$(printf '[   0]:0x1\n[   1]:0x2')" "$(nvme list-ns $R)"
w=$(printf '[   0]:0x1\n[   1]:0x2')
expect_eq list_ns_as_c_driver "$w|$w" "$(nvme list-ns $C)|$(nvme list-ns $R)"
expect_eq get_ns_id "rnvme0n2: namespace-id:2" "$(nvme get-ns-id ${R}n2)"

# --- the namespaces' generic character devices (/dev/rng0n<N>, as C's /dev/ng0n<N>) ------
G=/dev/rng0
CG=/dev/ng$(basename "$(c_disk 2)" | sed 's/^nvme//')
for n in 1 2; do check "generic_device_$n" test -c ${G}n$n; done
check c_generic_device test -c "$CG"
# Root's only, as the controller's (devtmpfs's default; no udev daemon here changes it).
expect_eq generic_device_mode_as_c "crw-------|crw-------" \
	"$(ls -l "$CG" | cut -c1-10)|$(ls -l ${G}n2 | cut -c1-10)"
expect_eq generic_device_below_the_controller "$PCI" \
	"$(basename "$(readlink -f /sys/class/misc/rng0n2/device)")"
expect_eq generic_id_ns_as_disk "$(nvme id-ns ${R}n2 | sed 1d)" "$(nvme id-ns ${G}n2 | sed 1d)"
as_c generic_id_ns_as_c "$(nvme id-ns "$CG" | sed 1d)" "$(nvme id-ns ${G}n2 | sed 1d)" \
	'*nsze *: 0x20000*'
expect_eq generic_get_ns_id "rng0n2: namespace-id:2" "$(nvme get-ns-id ${G}n2)"
# What is written through the generic device is what the disk reads, and the other way.
dd if=/dev/urandom of=/tmp/g bs=4k count=2 2>/dev/null
check generic_submit_io_write nvme write ${G}n2 -s 200 -c 15 -z 8192 -d /tmp/g
check disk_reads_generic_write sh -c \
	"dd if=${R}n2 bs=512 skip=200 count=16 iflag=direct 2>/dev/null | cmp - /tmp/g"
dd if=/dev/urandom of=/tmp/g bs=4k count=2 2>/dev/null
dd if=/tmp/g of=${R}n2 bs=512 seek=300 oflag=direct 2>/dev/null
check generic_io_passthru_reads_disk_write sh -c \
	"nvme io-passthru ${G}n2 -o 2 -n 2 --cdw10=300 --cdw12=15 -l 8192 -r -b 2>/dev/null | cmp - /tmp/g"

# --- logs --------------------------------------------------------------------------------
rs=$(nvme smart-log $R) || fail smart_log "nvme smart-log failed"
cs=$(nvme smart-log $C)
for f in critical_warning temperature available_spare available_spare_threshold \
	percentage_used; do
	w='[0-9]*'
	[ $f = temperature ] && w='50°C (323 Kelvin)'
	as_c "smart_log_${f}_as_c_driver" "$(field "$cs" $f)" "$(field "$rs" $f)" "$w"
done
expect_eq smart_log_temperature_qemu "50°C (323 Kelvin)" "$(field "$rs" temperature)"
re=$(nvme error-log $R -e 4) || fail error_log "nvme error-log failed"
# nvme-cli reads ELPE + 1 entries at most.
expect_eq error_log_entries $(($(field "$rid" elpe) + 1)) "$(echo "$re" | grep -c 'Entry\[')"
as_c error_log_as_c_driver "$(nvme error-log $C -e 4 | sed 1d)" "$(echo "$re" | sed 1d)" \
	'*error_count*'
as_c fw_log_as_c_driver "$(nvme fw-log $C | sed 1d)" "$(nvme fw-log $R | sed 1d)" '*frs1 :*'
check fw_log_has_slot1 sh -c "nvme fw-log $R | grep -q frs1"
# get-log of sizes across the one-, two- and multi-page boundaries, as through the C driver.
# Each the n bytes asked for (raw), not the same error message twice.
for n in 4096 8192 16384; do
	nvme get-log $C -i 1 -l $n -b >/tmp/log-c 2>&1
	nvme get-log $R -i 1 -l $n -b >/tmp/log-r 2>&1
	expect_eq "get_log_${n}_bytes_as_c_driver" "$n $(sha256sum </tmp/log-c)" \
		"$(wc -c </tmp/log-r) $(sha256sum </tmp/log-r)"
done

# --- features ----------------------------------------------------------------------------
vwc() { nvme get-feature $R -f 6 | sed -n 's/.*Current value: *//p'; }
expect_eq get_feature_vwc_enabled 0x00000001 "$(vwc)"
check set_feature_vwc_off nvme set-feature $R -f 6 -v 0
expect_eq get_feature_vwc_now_off 00000000 "$(vwc)"
check set_feature_vwc_on nvme set-feature $R -f 6 -v 1
expect_eq get_feature_vwc_on_again 0x00000001 "$(vwc)"
# Temperature threshold and arbitration read the same through both drivers: a value each,
# Arbitration QEMU's default (no burst limit, 7).
for f in 1 4; do
	w='*Current value:*'
	[ $f = 1 ] && w='*Current value:0x00000007*'
	as_c "get_feature_${f}_as_c_driver" \
		"$(nvme get-feature $C -f $f)" "$(nvme get-feature $R -f $f)" "$w"
done
# QEMU refuses a feature it does not have with Invalid Field in Command (0x4002), which
# rnvme passes on (it keeps only its own features from user space).
rc=$(nvme set-feature $R -f 0xee -v 1 >/tmp/sf.out 2>&1; echo $?)
expect_eq set_feature_bad_fid_fails "1 Invalid Field in Command" \
	"$rc $(grep -o 'Invalid Field in Command' /tmp/sf.out)"

# --- read, write, flush ---------------------------------------------------------------------
dd if=/dev/urandom of=/tmp/d bs=64k count=1 2>/dev/null
check nvme_write nvme write ${R}n1 -s 100 -c 127 -z 65536 -d /tmp/d
check nvme_read nvme read ${R}n1 -s 100 -c 127 -z 65536 -d /tmp/o
check nvme_read_returns_written cmp /tmp/d /tmp/o
check block_read_sees_nvme_write sh -c \
	"dd if=${R}n1 bs=512 skip=100 count=128 iflag=direct 2>/dev/null | cmp - /tmp/d"
check nvme_flush nvme flush ${R}n1
check nvme_flush_chardev nvme flush $R -n 1
check admin_passthru_identify sh -c \
	"nvme admin-passthru $R -o 6 --cdw10=1 -l 4096 -r -b | dd bs=1 skip=4 count=8 2>/dev/null | grep -qx rnvme-s0"

# --- debugfs queue counters --------------------------------------------------------------
check debugfs_queue_files test -r /sys/kernel/debug/rnvme0/q0 -a -r /sys/kernel/debug/rnvme0/q1
c0=$(stat_sum 0 completed) s0=$(stat_sum 0 submitted) d0=$(stat_sum 0 sq_doorbells)
dd if=${R}n1 of=/dev/null bs=4k count=100 iflag=direct 2>/dev/null
c1=$(stat_sum 0 completed) s1=$(stat_sum 0 submitted) d1=$(stat_sum 0 sq_doorbells)
expect_eq debugfs_completed_counts_100_reads 1 "$(((c1 - c0) >= 100 && (c1 - c0) < 110))"
expect_eq debugfs_submitted_counts_100_reads 1 "$(((s1 - s0) >= 100 && (s1 - s0) < 110))"
expect_eq debugfs_doorbell_per_read_at_qd1 1 "$(((d1 - d0) >= 100))"
expect_eq debugfs_in_flight_idle 0 "$(stat_sum 0 in_flight)"
expect_eq debugfs_interrupts_counted 1 "$(($(stat_sum 0 interrupts) >= 100))"
expect_eq debugfs_no_polled_without_poll_queues 0 "$(stat_sum 0 polled)"
expect_eq debugfs_no_timeouts 0 "$(stat_sum 0 timeouts)"
expect_eq debugfs_no_errors_yet 0 "$(stat_sum 0 errors)"
expect_eq debugfs_admin_commands_counted 1 "$(($(stat_sum 0 completed q0) > 10))"

# --- reset and rescan ----------------------------------------------------------------------
before=$(cat $S/resets)
nq=$(($(cat $S/queue_count) - 1))
dmesg -c >/dev/null
trace_mark reset_begin ${R}n1
check nvme_reset nvme reset $R
# The device saw the reset re-create every I/O queue (Create I/O Submission Queue).
trace_expect reset_recreates_io_queues reset_begin reset_end eq $nq \
	"pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x1 "
trace_expect reset_enables_controller_once reset_begin reset_end eq 1 "pci_nvme_mmio_start_success"
# A queue the reset lost would stall I/O until its timeouts: make those short, so such a
# failure shows within a minute.
echo 5000 >/sys/block/rnvme0n1/queue/io_timeout
expect_eq reset_counted $((before + 1)) "$(cat $S/resets)"
expect_eq reset_logged 1 "$(dmesg | grep -c 'resetting controller (reset requested by user space)')"
expect_eq state_live_after_reset live "$(cat $S/state)"
check read_after_reset sh -c "dd if=${R}n1 bs=512 skip=100 count=128 iflag=direct 2>/dev/null | cmp - /tmp/d"
trace_mark reset_end ${R}n1
check nvme_ns_rescan nvme ns-rescan $R
check disks_kept_by_rescan test -b ${R}n1 -a -b ${R}n2

# --- sysfs controls: reset_controller, rescan_controller (C's, on both drivers) --------------
# A write resets the controller and returns once it is back: the device sees one enable
# and every I/O queue created again; a rescan identifies the namespaces again (Identify)
# and keeps the disks. The same on the C driver's identical controller.
for drv in rnvme nvme; do
	if [ $drv = rnvme ]; then sys=$S disk=${R}n1; else sys=$CS disk=${C}n1; fi
	expect_eq "${drv}_sysfs_controls_write_only" "--w-------" \
		"$(ls -l $sys/reset_controller $sys/rescan_controller | cut -c1-10 | sort -u)"
	nq=$(($(cat $sys/queue_count) - 1))
	# A read from CPU 0 before the reset and after it, on the same queue: that queue has
	# run commands since the last reset, so a shadow doorbell event index kept across the
	# reset would hold back the read after it.
	busybox taskset -c 0 dd if="$disk" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
	trace_mark "${drv}_sysfs_reset_begin" "$disk"
	check "${drv}_sysfs_reset_controller" sh -c "echo 1 >$sys/reset_controller"
	expect_eq "${drv}_live_after_sysfs_reset" live "$(cat $sys/state)"
	check "${drv}_read_after_sysfs_reset" busybox taskset -c 0 dd if="$disk" of=/dev/null bs=4k \
		count=16 iflag=direct
	trace_mark "${drv}_sysfs_reset_end" "$disk"
	trace_expect "${drv}_sysfs_reset_enables_once" "${drv}_sysfs_reset_begin" \
		"${drv}_sysfs_reset_end" eq 1 "pci_nvme_mmio_start_success"
	trace_expect "${drv}_sysfs_reset_recreates_io_queues" "${drv}_sysfs_reset_begin" \
		"${drv}_sysfs_reset_end" eq $nq "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x1 "
	check "${drv}_sysfs_rescan_controller" sh -c "echo 1 >$sys/rescan_controller"
	# rnvme scans before the write returns; C's scan runs in a work item, soon after.
	[ $drv = nvme ] && sleep 2
	trace_mark "${drv}_sysfs_rescan_end" "$disk"
	trace_expect "${drv}_sysfs_rescan_reads_namespace_list" "${drv}_sysfs_reset_end" \
		"${drv}_sysfs_rescan_end" ge 1 "pci_nvme_admin_cmd cid [0-9]+ sqid 0 opc 0x6 "
	check "${drv}_disks_kept_by_sysfs_rescan" test -b "${disk%1}1" -a -b "${disk%1}2"
done
expect_eq sysfs_reset_counted $((before + 2)) "$(cat $S/resets)"
# delete_controller: C offers it for fabrics controllers only (a PCI function is deleted by
# unbinding it): hidden on both.
c=$(ls $CS/delete_controller 2>&1 | grep -c 'No such')
expect_eq delete_controller_hidden_as_c "1 1" "$c $(ls $S/delete_controller 2>&1 | grep -c 'No such')"
expect_eq delete_controller_hidden 1 "$(ls $S/delete_controller 2>&1 | grep -c 'No such')"
# No controller memory buffer here: its attributes hidden on both, as C hides them.
expect_eq cmb_attrs_hidden_as_c "0 0" "$(ls $CS | grep -c '^cmb') $(ls $S | grep -c '^cmb')"

# --- ioctl edge cases, fuzz (namespace 2 is the scratch namespace) ---------------------------
run_helper nvme_ioctl_check_ran nvme-ioctl check $R ${R}n2
# Its invalid opcode and out-of-range commands failed on the I/O queues, one on the admin.
expect_eq debugfs_io_errors_counted 1 "$(($(stat_sum 0 errors) >= 2))"
expect_eq debugfs_admin_errors_counted 1 "$(($(stat_sum 0 errors q0) >= 1))"
run_helper nvme_ioctl_fuzz_ran nvme-ioctl fuzz $R ${R}n2 "$FUZZ_N" 1
check data_outside_scratch_untouched sh -c \
	"dd if=${R}n1 bs=512 skip=100 count=128 iflag=direct 2>/dev/null | cmp - /tmp/d"
expect_eq state_live_after_fuzz live "$(cat $S/state)"
image_write host_image ${R}n1 0 1

# --- module parameters in sysfs, as C's ---------------------------------------------------
# Each parameter both drivers have shows in /sys/module with C's permissions and, where the
# defaults agree, C's value; a write is checked as at load (the bad one refused with its
# message, the value kept), and a good one applies at the next bind (QEMU's create-SQ
# commands below).
RP=/sys/module/rnvme/parameters
for n in admin_timeout io_timeout io_queue_depth sgl_threshold write_queues poll_queues \
	multipath quirks iopolicy; do
	c=/sys/module/nvme/parameters/$n
	[ -e $c ] || c=/sys/module/nvme_core/parameters/$n
	expect_eq "param_${n}_mode_as_c" "$(stat -c %a $c 2>&1)" "$(stat -c %a $RP/$n 2>&1)"
done
for n in admin_timeout io_timeout io_queue_depth sgl_threshold write_queues poll_queues \
	multipath iopolicy; do
	c=/sys/module/nvme/parameters/$n
	[ -e $c ] || c=/sys/module/nvme_core/parameters/$n
	# C shows a bool as Y/N, its iopolicy's name; the same spelling on both.
	expect_eq "param_${n}_value_as_c" "$(cat $c 2>&1)" "$(cat $RP/$n 2>&1)"
done
# param_write_refused NAME VALUE: the write fails, the log names it, the value stays.
param_write_refused() {
	before=$(cat $RP/$1)
	dmesg -c >/dev/null
	if echo "$2" >$RP/$1 2>/dev/null; then
		fail "param_write_$1_$2_refused" "the write succeeded"
	elif ! dmesg | grep -q "$1=$2 is"; then
		fail "param_write_$1_$2_refused" "no message naming it: $(dmesg | tail -1)"
	else
		expect_eq "param_write_$1_$2_refused" "$before" "$(cat $RP/$1)"
	fi
}
param_write_refused io_queue_depth 1
param_write_refused io_queue_depth 5000
param_write_refused io_queue_depth abc
param_write_refused io_timeout 0
param_write_refused poll_queues 2000
param_write_refused iopolicy nope
# C refuses the same depth (and keeps its value).
if echo 1 >/sys/module/nvme/parameters/io_queue_depth 2>/dev/null; then
	fail param_write_io_queue_depth_1_refused_by_c "C accepted it"
else
	expect_eq param_write_io_queue_depth_1_refused_by_c 1024 "$(cat /sys/module/nvme/parameters/io_queue_depth)"
fi
check param_write_iopolicy sh -c "echo round-robin >$RP/iopolicy"
expect_eq param_iopolicy_written round-robin "$(cat $RP/iopolicy)"
echo numa >$RP/iopolicy
check param_write_io_queue_depth sh -c "echo 64 >$RP/io_queue_depth"
expect_eq param_io_queue_depth_written 64 "$(cat $RP/io_queue_depth)"
nio=$(($(cat $S/queue_count) - 1))
trace_mark param_depth_begin ${R}n1

# --- unbind with open files, rebind ----------------------------------------------------------
run_helper nvme_ioctl_unbind_ran nvme-ioctl unbind "$PCI" $R ${R}n1
check chardev_gone_after_unbind test ! -e $R
echo "$PCI" >/sys/bus/pci/drivers/rnvme/bind
wait_for 10 disk_live /dev/rnvme0n1
# The depth written above: every I/O submission queue of the new bind has 64 entries.
trace_mark param_depth_end ${R}n1
trace_expect param_io_queue_depth_applies_at_bind param_depth_begin param_depth_end eq $nio \
	"pci_nvme_create_sq .* qsize=63,"
trace_expect param_io_queue_depth_every_queue param_depth_begin param_depth_end eq $nio \
	"pci_nvme_create_sq "
echo 1024 >$RP/io_queue_depth
check id_ctrl_after_rebind nvme id-ctrl $R
check generic_devices_after_rebind test -c ${G}n1 -a -c ${G}n2
check rmmod rmmod rnvme
check generic_devices_gone_after_rmmod test ! -e ${G}n1 -a ! -e ${G}n2
finish
