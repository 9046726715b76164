# SPDX-License-Identifier: GPL-2.0
# Zoned namespaces (issue 17 item 4): two identical controllers, rnvme's and the C driver's,
# each with one zoned namespace (QEMU zoned=true: 8 MiB zones of 6 MiB capacity, at most 12
# open and 14 active, Zone Append up to 128 KiB). Both drivers make a host-managed zoned disk
# of it: its limits as C's; the zone report (through the driver's report_zones) as C's after
# the same writes and zone operations, and as the device's own report (nvme-cli on the
# generic devices); the open-zone limit reported as C reports it; fio zonemode=zbd writes
# and verifies; btrfs, which writes its data with Zone Append, keeps files across a
# remount, with the Zone Append commands counted in QEMU's trace.
. /guest/lib.sh
R=/dev/rnvme0n1 C=/dev/nvme0n1 RS=/sys/block/rnvme0n1 CS=/sys/block/nvme0n1

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_disk $R
require_disk c_driver_disk $C

# The disk's zoned limits, as C's, and as the QEMU options make them (scripts/test.sh: 512
# MiB of 512-byte blocks, 8 MiB zones: 16384 sectors, 64 zones; MOR/MAR 12/14; ZASL 5: 2^5
# 4 KiB pages; QEMU's default MDTS 7: 512 KiB; the zone write granularity defaults to the
# block size), so that two equal failures do not pass.
expect_eq zoned_model host-managed "$(cat $RS/queue/zoned)"
for av in zoned=host-managed chunk_sectors=16384 nr_zones=64 max_open_zones=12 \
	max_active_zones=14 zone_append_max_bytes=131072 zone_write_granularity=512 \
	logical_block_size=512 max_hw_sectors_kb=512 ro=0; do
	a=${av%=*} v=${av#*=}
	c=$(cat $CS/queue/$a 2>/dev/null || cat $CS/$a)
	expect_eq "${a}_as_c" "$v $v" "$c $(cat $RS/queue/$a 2>/dev/null || cat $RS/$a)"
done
expect_eq nr_zones 64 "$(cat $RS/queue/nr_zones)"
expect_eq zone_append_max_bytes 131072 "$(cat $RS/queue/zone_append_max_bytes)"
# 512 MiB (--size 512M).
expect_eq size_as_c "536870912 536870912" "$(blockdev --getsize64 $C) $(blockdev --getsize64 $R)"

# Zone reports: the block layer's (blkzone, through report_zones) as C's, and as the
# device's own (Zone Management Receive through each generic device), after each step.
# C names the generic device after its disk.
CG=/dev/ng${C#/dev/nvme} RG=/dev/rng0n1
zreport() { blkzone report "$@" 2>&1 | sed 's|/dev/[a-z0-9]*||'; }
device_report() { nvme zns report-zones "$1" -d 64 2>&1 | grep -v '^nr_zones'; }
# Each report must also be one of all 64 zones (a zone line each), not the same error twice.
compare_reports() { # STEP
	c=$(zreport $C) r=$(zreport $R)
	expect_eq "report_${1}_as_c" "64 $c" "$(echo "$r" | grep -c 'start:') $r"
	c=$(device_report $CG) r=$(device_report $RG)
	expect_eq "device_report_${1}_as_c" "64 $c" "$(echo "$r" | grep -c 'SLBA:') $r"
}
compare_reports empty
expect_eq zones_reported 64 "$(zreport $R | grep -c 'start:')"
# Zone capacity (6 MiB of 8 MiB: 0x3000 sectors) and length as the device says.
expect_eq zone_capacity_reported 64 "$(zreport $R | grep -c 'len 0x004000, cap 0x003000')"

# Writes at the write pointers: zone 0 full to its capacity (then Full), 1 MiB into zone 1.
head -c $((6 << 20)) /dev/urandom >/tmp/z0
head -c $((1 << 20)) /dev/urandom >/tmp/z1
for dev in $R $C; do
	dd if=/tmp/z0 of=$dev bs=1M oflag=direct 2>/dev/null
	dd if=/tmp/z1 of=$dev bs=1M seek=8 oflag=direct 2>/dev/null
done
compare_reports written
# blkzone: "start: 0x..., len 0x..., cap 0x..., wptr 0x... (from the start) ..., zcond:14(fu) ...".
cond() { sed -n 's/.*zcond: *\([0-9]*\).*/\1/p' | xargs; }
expect_eq zone0_full 14 "$(blkzone report -c 1 $R | cond)"
expect_eq zone1_write_pointer "0x000800" "$(blkzone report -o 0x4000 -c 1 $R | sed -n 's/.*wptr \(0x[0-9a-f]*\).*/\1/p')"
for z in 0 1; do
	f=/tmp/z$z
	dd if=$R of=/tmp/back bs=1M skip=$((z * 8)) count=$(($(wc -c <$f) >> 20)) iflag=direct 2>/dev/null
	check "zone${z}_data_read_back" cmp -s $f /tmp/back
done
# A write off the write pointer fails (as C's), and leaves the zone as it was: 2 MiB into
# zone 1, whose write pointer is at 1 MiB. The block layer's zone write plug refuses it
# before any driver sees it (blk_zone_wplug_prepare_bio: bio_io_error, EIO).
wr_off() { dd if=/tmp/z1 of=$1 bs=4k count=1 seek=$((10 << 8)) oflag=direct 2>&1 | grep -oE 'Input/output error|Invalid argument|No space left|[0-9]+ bytes' | head -1; }
expect_eq write_off_wp_as_c "Input/output error Input/output error" "$(wr_off $C) $(wr_off $R)"

# Zone operations: open zones 2-3, close 3, finish 4, reset 1; then the partial report.
for dev in $R $C; do
	blkzone open -o 0x8000 -c 2 $dev
	blkzone close -o 0xc000 -c 1 $dev
	blkzone finish -o 0x10000 -c 1 $dev
	blkzone reset -o 0x4000 -c 1 $dev
done
compare_reports operations
# Empty, explicitly opened, closed, full.
expect_eq zone_conditions "1 3 4 14" "$(blkzone report -o 0x4000 -c 4 $R | cond)"
# Zones 2-4: explicitly opened, closed, full.
c=$(zreport -o 0x8000 -c 3 $C) r=$(zreport -o 0x8000 -c 3 $R)
expect_eq partial_report_as_c "3 4 14 $c" "$(echo "$r" | cond) $r"
# The open-zone limit (12): explicit opens of zones 5-20 until the device refuses one; the
# same number succeed and the refusal has the same error as C's (Too Many Open Zones:
# BLK_STS_ZONE_OPEN_RESOURCE, ETOOMANYREFS, not a plain I/O error).
open_until_refused() {
	n=0
	for z in $(seq 5 20); do
		if ! out=$(blkzone open -o $((z << 14)) -c 1 $1 2>&1); then
			echo "$n opened, then: ${out#*failed: }"
			return
		fi
		n=$((n + 1))
	done
	echo "$n opened, none refused"
}
r=$(open_until_refused $R) c=$(open_until_refused $C)
# 11 of them: zone 2 is open already (1 was reset, 3 closed, 4 finished), and QEMU counts
# 13 active then (2, 3 and the 11: under MAR 14), so the 12th open is refused for MOR 12.
want="11 opened, then: Too many references: cannot splice"
expect_eq open_zone_limit_as_c "$want|$want" "$c|$r"
case "$r" in *"Too many references"*) pass open_zone_limit_errno ;; *) fail open_zone_limit_errno "$r" ;; esac
compare_reports opened
# A reset of the whole disk (REQ_OP_ZONE_RESET_ALL): every zone empty, on the device too.
for dev in $R $C; do blkzone reset $dev; done
compare_reports reset_all
expect_eq all_zones_empty 64 "$(zreport $R | grep -c 'zcond: 1(em)')"

# fio zonemode=zbd: sequential then random writes at the write pointers of 16 zones,
# verified, 8 deep, on both drivers.
for d in rnvme nvme; do
	dev=/dev/${d}0n1
	for rw in write randwrite; do
		if fio --name=zbd --filename=$dev --ioengine=libaio --direct=1 --zonemode=zbd \
			--rw=$rw --bs=64k --iodepth=8 --size=128M --max_open_zones=8 \
			--verify=crc32c --verify_fatal=1 --randseed=3 --output=/tmp/zbd-$d.log &&
			! grep -qE 'err=[ ]*[1-9]|verify: bad' /tmp/zbd-$d.log; then
			pass "${d}_fio_zbd_${rw}_verify"
		else
			fail "${d}_fio_zbd_${rw}_verify" "$(grep -iE 'err|verify|zone' /tmp/zbd-$d.log | head -3)"
		fi
		blkzone reset $dev
	done
done
compare_reports after_fio

# btrfs (zoned mode, found by mkfs): a tree of files and 20 MiB of random data written,
# the filesystem remounted, the files compared. Its data goes out as Zone Append, whose
# completions say where the data landed: wrong positions would read back wrong data.
mkdir -p /mnt
head -c $((20 << 20)) /dev/urandom >/tmp/big
btrfs_roundtrip() { # DEV
	mkfs.btrfs -f -d single -m single $1 >/tmp/mkfs.log 2>&1 ||
		{ echo "mkfs failed: $(tail -2 /tmp/mkfs.log)"; return; }
	grep -qi zoned /tmp/mkfs.log || { echo "mkfs did not make a zoned filesystem"; return; }
	mount -t btrfs $1 /mnt 2>/dev/null || { echo "mount failed: $(dmesg | tail -2)"; return; }
	cp -r /guest /mnt/g && cp /tmp/big /mnt/big && sync && umount /mnt && mount -t btrfs $1 /mnt &&
		diff -r /guest /mnt/g >/dev/null && cmp -s /mnt/big /tmp/big && echo ok || echo "contents differ"
	umount /mnt 2>/dev/null
}
for d in rnvme nvme; do
	dev=/dev/${d}0n1
	trace_mark ${d}_btrfs_start $dev
	expect_eq ${d}_btrfs_files_kept ok "$(btrfs_roundtrip $dev)"
	trace_mark ${d}_btrfs_end $dev
	# Zone Append commands on the device during the run (btrfs writes data only so).
	trace_expect ${d}_btrfs_zone_appends ${d}_btrfs_start ${d}_btrfs_end ge 100 \
		'pci_nvme_write cid [0-9]+ opname .NVME_ZONED_CMD_ZONE_APPEND.'
done
check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
finish
