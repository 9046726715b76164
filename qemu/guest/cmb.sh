# SPDX-License-Identifier: GPL-2.0
# The Controller Memory Buffer beside the C driver: two identical controllers with a 2 MiB
# buffer (QEMU's cmb_size_mb), the first on rnvme, the second on C. Both publish it as
# peer-to-peer memory of the same size (sysfs p2pmem), both put their I/O submission queues
# in it (QEMU's trace: every Create I/O Submission Queue of a bind names an address inside
# the buffer's BAR) and take the same room from it; data verifies with the queues there;
# with use_cmb_sqes=0 rnvme's queues are in host memory again (none in the BAR) and data
# verifies as well. With 18 queues of 2048 entries (128 KiB each) the buffer holds them all
# only shallower: both drivers make every one 1792 deep, in the buffer. The guest has 16
# CPUs, 2 of them left online (as many as the host has cores, for TCG's sake): each driver
# asks for a queue per possible CPU.
. /guest/lib.sh

for c in /sys/devices/system/cpu/cpu[0-9]*; do
	[ "${c##*cpu}" -lt 2 ] || echo 0 >"$c/online"
done

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
RP=$(bound_to rnvme | head -1)
CP=$(bound_to nvme | head -1)
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_disk /dev/nvme0n1
R=/sys/bus/pci/devices/$RP C=/sys/bus/pci/devices/$CP

# in_bar_regex PCI BAR: an extended regex matching `addr=0x...,` inside BAR BAR of PCI (its
# sysfs resource line; a BAR is aligned to its size, so the address's bits above 16 MiB
# take one of size/16 MiB values).
in_bar_regex() {
	local start end alt="" p
	set -- $(sed -n "$(($2 + 1))p" /sys/bus/pci/devices/$1/resource)
	start=$(($1)) end=$(($2))
	p=$((start >> 24))
	while [ $p -le $((end >> 24)) ]; do
		alt="$alt${alt:+|}$(printf '%x' $p)"
		p=$((p + 1))
	done
	echo "addr=0x($alt)[0-9a-f]{6},"
}

# --- published as peer-to-peer memory, as C's ----------------------------------------
for f in size published; do
	expect_eq "p2pmem_${f}_as_c" "$(cat $C/p2pmem/$f 2>&1)" "$(cat $R/p2pmem/$f 2>&1)"
done
expect_eq p2pmem_size 2097152 "$(cat $R/p2pmem/size 2>&1)"
# The queues took the same room from it (the same number and depth of queues).
expect_eq p2pmem_available_as_c "$(cat $C/p2pmem/available 2>&1)" "$(cat $R/p2pmem/available 2>&1)"
check p2pmem_used_by_queues test "$(cat $R/p2pmem/available)" -lt "$(cat $R/p2pmem/size)"

# The buffer's registers in sysfs, as C's.
for a in cmb cmbloc cmbsz; do
	expect_eq "${a}_attr_as_c" "$(cat /sys/class/nvme/nvme0/$a 2>&1)" "$(cat /sys/class/misc/rnvme0/$a 2>&1)"
done

# --- the submission queues in the buffer: each driver bound again between marks ------
nq=$(($(cat /sys/class/misc/rnvme0/queue_count) - 1))
# The buffer's BAR: CMBLOC's BIR.
bar=$(($(cat /sys/class/misc/rnvme0/cmbloc) & 7))
RX=$(in_bar_regex $RP $bar) CX=$(in_bar_regex $CP $bar)
# rebind NAME DRIVER PCI DISK OTHER TEST: DRIVER's controller PCI unbound and bound
# again, its disk DISK back (test TEST), between trace marks NAME_begin and NAME_end
# (read through the other driver's disk OTHER, which stays).
rebind() {
	trace_mark "$1_begin" "$5"
	echo "$3" >"/sys/bus/pci/drivers/$2/unbind"
	echo "$3" >"/sys/bus/pci/drivers/$2/bind"
	require_disk "$6" "$4"
	trace_mark "$1_end" "$5"
}
rebind cmb_rnvme rnvme $RP /dev/rnvme0n1 /dev/nvme0n1 rnvme_disk_rebound
trace_expect rnvme_sqs_in_cmb cmb_rnvme_begin cmb_rnvme_end eq $nq "pci_nvme_create_sq .*$RX"
trace_expect rnvme_sqs_created cmb_rnvme_begin cmb_rnvme_end eq $nq "pci_nvme_create_sq "
rebind cmb_c nvme $CP /dev/nvme0n1 /dev/rnvme0n1 c_disk_rebound
trace_expect c_sqs_in_cmb cmb_c_begin cmb_c_end eq $nq "pci_nvme_create_sq .*$CX"

# --- data with the queues there --------------------------------------------------------
fio_write_verify cmb_sqs_fio_verify /dev/rnvme0n1 16M 1
fio_write_verify c_cmb_sqs_fio_verify /dev/nvme0n1 16M 2

# --- use_cmb_sqes=0: host memory again ---------------------------------------------------
check rmmod_for_param rmmod rnvme
trace_mark cmb_off_begin /dev/nvme0n1
check insmod_use_cmb_sqes_0 insmod /lib/rnvme.ko use_cmb_sqes=0
require_disk rnvme_disk_no_cmb_sqes /dev/rnvme0n1
trace_mark cmb_off_end /dev/nvme0n1
trace_absent rnvme_sqs_not_in_cmb_when_off cmb_off_begin cmb_off_end \
	"pci_nvme_create_sq .*$RX" "pci_nvme_create_sq "
expect_eq p2pmem_unused_when_off "$(cat $R/p2pmem/size)" "$(cat $R/p2pmem/available)"
fio_write_verify no_cmb_sqs_fio_verify /dev/rnvme0n1 16M 3

# --- a buffer too small for every queue at full depth: all shallower, as C's ------------
# A queue per possible CPU plus 2 for writes, 2048 entries asked for (CAP.MQES allows 2048):
# 18 queues of 128 KiB do not fit in 2 MiB; an equal share, in whole pages, holds 1792
# entries.
# Each driver loaded again with these parameters between marks read through the other's disk.
check rmmod_for_small_cmb rmmod rnvme
trace_mark small_cmb_rnvme_begin /dev/nvme0n1
check insmod_deep_queues insmod /lib/rnvme.ko io_queue_depth=2048 write_queues=2
require_disk rnvme_disk_deep_queues /dev/rnvme0n1
trace_mark small_cmb_rnvme_end /dev/nvme0n1
trace_mark small_cmb_c_begin /dev/rnvme0n1
check c_reload_deep_queues sh -c 'rmmod nvme && insmod /lib/c/nvme.ko io_queue_depth=2048 write_queues=2'
require_disk c_disk_deep_queues /dev/nvme0n1
trace_mark small_cmb_c_end /dev/rnvme0n1
nq=$(($(cat /sys/class/misc/rnvme0/queue_count) - 1))
expect_eq deep_queue_count_as_c "$(cat /sys/class/nvme/nvme0/queue_count 2>&1)" \
	"$(cat /sys/class/misc/rnvme0/queue_count 2>&1)"
check eighteen_queues_granted test "$nq" -eq 18
trace_expect rnvme_small_cmb_sqs_shallower small_cmb_rnvme_begin small_cmb_rnvme_end eq $nq \
	"pci_nvme_create_sq .*${RX}.* qsize=1791,"
trace_expect rnvme_small_cmb_sqs_created small_cmb_rnvme_begin small_cmb_rnvme_end eq $nq \
	"pci_nvme_create_sq "
trace_expect c_small_cmb_sqs_shallower small_cmb_c_begin small_cmb_c_end eq $nq \
	"pci_nvme_create_sq .*${CX}.* qsize=1791,"
expect_eq p2pmem_available_small_as_c "$(cat $C/p2pmem/available 2>&1)" "$(cat $R/p2pmem/available 2>&1)"
fio_write_verify small_cmb_fio_verify /dev/rnvme0n1 16M 4
image_write host_image /dev/rnvme0n1 0 1
kmemleak_plant
check rmmod rmmod rnvme
finish
