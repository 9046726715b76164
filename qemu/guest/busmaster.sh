# SPDX-License-Identifier: GPL-2.0
# Bus mastering lost: the guest clears Bus Master Enable in the controller's PCI command
# register (as a PCI error or a stray setpci can), then resets the controller. Without bus
# mastering the controller cannot fetch a command: the reset must restore it (as the C
# driver's does in every reset), not enable the controller, wait for its first admin
# command to time out and declare it dead (it used to). Then fio writes and verifies
# 16 MiB. The same on an identical controller under the C driver.
. /guest/lib.sh

assign_drivers rnvme nvme
# The C driver needs its first admin command after the enable to time out here (60 s by
# default: a hung-task report on the debug kernel), then recovers.
insmod /lib/c/nvme-core.ko admin_timeout=5 && insmod /lib/c/nvme.ko
check insmod insmod /lib/rnvme.ko admin_timeout=5
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1

# bme_loss DRIVER CHARDEV DISK: the test on one controller.
bme_loss() {
	local drv=$1 pci cmd
	pci=$(bound_to "$drv" | head -1)
	cmd=$(pci_command "$pci")
	pci_command "$pci" $((cmd & ~4))
	check "${drv}_reset_without_bus_master" nvme reset "$2"
	expect_eq "${drv}_reset_restores_bus_master" 1 $((($(pci_command "$pci") >> 2) & 1))
	if fio --name=bme --filename="$3" --rw=randwrite --bs=4k --iodepth=16 \
		--ioengine=io_uring --direct=1 --size=16M --verify=crc32c --randseed=11 \
		--output="/tmp/fio-$drv.log" && ! grep -qE "err=[ ]*[1-9]|verify: bad" "/tmp/fio-$drv.log"; then
		pass "${drv}_io_after_reset"
	else
		fail "${drv}_io_after_reset" "$(grep -E 'err=|verify' "/tmp/fio-$drv.log" | head -2 | tr '\n' ' ')"
	fi
	pci_command "$pci" "$cmd"
}

bme_loss rnvme /dev/rnvme0 /dev/rnvme0n1
expect_eq rnvme_state_live live "$(cat /sys/class/misc/rnvme0/state)"
bme_loss nvme /dev/nvme0 /dev/nvme0n1
check rmmod rmmod rnvme
finish
