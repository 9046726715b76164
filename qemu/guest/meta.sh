# SPDX-License-Identifier: GPL-2.0
# A namespace whose LBA format carries metadata is skipped with a message, not mis-sized.
. /guest/lib.sh
check insmod insmod /lib/rnvme.ko
if dmesg | grep -q 'rnvme0: namespace 1 skipped: its LBA format carries metadata'; then
	pass metadata_namespace_skipped_with_message
else
	fail metadata_namespace_skipped_with_message "no message: $(dmesg | grep rnvme | tail -2)"
fi
expect_eq no_disk_for_metadata_namespace "" "$(ls /dev | grep -E '^rnvme0n' || true)"
check rmmod rmmod rnvme
finish
