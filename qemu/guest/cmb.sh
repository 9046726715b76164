# SPDX-License-Identifier: GPL-2.0
# The Controller Memory Buffer beside the C driver: two identical controllers with a 64 MiB
# buffer (QEMU's cmb_size_mb), the first on rnvme, the second on C. Both publish it as
# peer-to-peer memory of the same size (sysfs p2pmem), both put their I/O submission queues
# in it (QEMU's trace: every Create I/O Submission Queue of a bind names an address inside
# the buffer's BAR) and take the same room from it; data verifies with the queues there;
# with use_cmb_sqes=0 rnvme's queues are in host memory again (none in the BAR) and data
# verifies as well.
. /guest/lib.sh

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
expect_eq p2pmem_size 67108864 "$(cat $R/p2pmem/size 2>&1)"
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
image_write host_image /dev/rnvme0n1 0 1
kmemleak_plant
check rmmod rmmod rnvme
finish
