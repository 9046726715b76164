# SPDX-License-Identifier: GPL-2.0
# Health: the temperatures in hwmon, and the health (SMART) and error events, rnvme beside
# the C driver on an identical controller. QEMU reports a composite temperature of 323 K,
# a warning threshold (WCTEMP) of 343 K and a critical one (CCTEMP) of 373 K; the host
# raises health warnings on request (RNVME-HMP: qom-set smart_critical_warning).
. /guest/lib.sh

assign_drivers rnvme nvme
insmod /lib/c/nvme-core.ko && insmod /lib/c/nvme.ko
if insmod /lib/rnvme.ko; then pass insmod; else abort insmod "insmod failed"; fi
require_disk rnvme_disk /dev/rnvme0n1
require_disk c_driver_disk /dev/nvme0n1
PCI=$(bound_to rnvme | head -1) CPCI=$(bound_to nvme | head -1)
# QEMU's device ids (nvme<N>, N from the serial rnvme-s<N>).
RID=nvme$(sed 's/^rnvme-s//' /sys/class/misc/rnvme0/serial)
CID=nvme$(sed 's/^rnvme-s//; s/ *$//' /sys/class/nvme/nvme0/serial)


# files DIR: the temp* attributes and their modes.
files() { (cd "$1" && for f in temp*; do echo "$f $(stat -c %a "$f")"; done) | tr '\n' ' '; }
# warning CHARDEV: the critical warning byte of the SMART log, read with Retain
# Asynchronous Event (so the read does not re-enable the controller's health events).
warning() {
	nvme get-log "$1" --log-id=2 --log-len=512 --rae --raw-binary 2>/dev/null |
		od -An -tu1 -N1 | tr -d ' '
}
warning_is() { [ "$(warning "$1")" = "$2" ]; }
# threshold CHARDEV [CDW11]: the Temperature Threshold feature's value, as nvme-cli reads it.
threshold() {
	nvme get-feature "$1" -f 4 ${2:+--cdw11=$2} 2>&1 | sed -n 's/.*Current value: *//p'
}
# bad_doorbell PCI: a write to the doorbell of submission queue 63 (never created: 0x1000 +
# 2 * 63 * 4), an error event of the controller at PCI.
bad_doorbell() { mmio-write "$1" 0x11f8 1 && sleep 2; }

RH=$(hwmon_of "$PCI") CH=$(hwmon_of "$CPCI")
[ -n "$RH" ] && pass hwmon_device || abort hwmon_device "no hwmon device below $PCI"
[ -n "$CH" ] && pass c_hwmon_device || abort c_hwmon_device "no hwmon device below $CPCI"
expect_eq hwmon_name rnvme "$(cat "$RH/name")"

# --- what hwmon shows, as C's ----------------------------------------------------------
expect_eq hwmon_files_as_c "$(files "$CH")" "$(files "$RH")"
for a in temp1_input temp1_max temp1_min temp1_crit temp1_label temp1_alarm; do
	expect_eq "${a}_as_c" "$(cat "$CH/$a")" "$(cat "$RH/$a" 2>&1)"
done
expect_eq temp1_input_is_qemus 49850 "$(cat "$RH/temp1_input")"
expect_eq temp1_max_is_wctemp 69850 "$(cat "$RH/temp1_max")"
expect_eq temp1_crit_is_cctemp 99850 "$(cat "$RH/temp1_crit")"
expect_eq temp1_alarm_off 0 "$(cat "$RH/temp1_alarm")"
# lm-sensors: the chip, and every line below its name and adapter as C's.
rs=$(sensors 'rnvme-*' 2>&1) cs=$(sensors 'nvme-*' 2>&1)
case "$(echo "$rs" | head -1)" in rnvme-pci-*) pass sensors_chip ;; *) fail sensors_chip "$(echo "$rs" | head -2)" ;; esac
expect_eq sensors_as_c "$(echo "$cs" | tail -n +3)" "$(echo "$rs" | tail -n +3)"
echo "$rs" | grep -qE '^Composite: +\+49\.9' && pass sensors_composite ||
	fail sensors_composite "$(echo "$rs" | grep Composite)"

# --- thresholds written through hwmon reach the device ------------------------------------
echo 60000 >"$RH/temp1_max"
expect_eq temp1_max_written 59850 "$(cat "$RH/temp1_max")"
expect_eq temp1_max_seen_by_nvme_cli 0x0000014d "$(threshold /dev/rnvme0)"
echo 10000 >"$RH/temp1_min"
expect_eq temp1_min_written 9850 "$(cat "$RH/temp1_min")"
expect_eq temp1_min_seen_by_nvme_cli 0x0000011b "$(threshold /dev/rnvme0 0x100000)"
echo 60000 >"$CH/temp1_max"
echo 10000 >"$CH/temp1_min"
expect_eq temp1_max_written_as_c "$(cat "$CH/temp1_max")" "$(cat "$RH/temp1_max")"
expect_eq temp1_min_written_as_c "$(cat "$CH/temp1_min")" "$(cat "$RH/temp1_min")"
if echo abc >"$RH/temp1_max" 2>/dev/null; then fail bad_threshold_refused "accepted"; else
	pass bad_threshold_refused
fi
expect_eq bad_threshold_changed_nothing 59850 "$(cat "$RH/temp1_max")"

# --- a threshold below the temperature: a health event, the alarm ---------------------------
trace_mark temp_event_start /dev/rnvme0n1
echo 40000 >"$RH/temp1_max"
sleep 2
trace_mark temp_event_end /dev/rnvme0n1
expect_eq temp_alarm_on 1 "$(cat "$RH/temp1_alarm")"
trace_expect temp_event_posted temp_event_start temp_event_end eq 1 'pci_nvme_aer_post_cqe type 0x1 info 0x1 lid 0x2'
trace_mark c_temp_event_start /dev/nvme0n1
echo 40000 >"$CH/temp1_max"
sleep 2
# The control of the check below: an event posted in the window, an error on rnvme's
# controller (rnvme reads the error log: its error events below still come; on C's, whose
# log nothing reads, it would hold back C's next one).
bad_doorbell "$PCI"
trace_mark c_temp_event_end /dev/nvme0n1
expect_eq temp_alarm_on_as_c "$(cat "$CH/temp1_alarm")" "$(cat "$RH/temp1_alarm")"
# The C driver enables no health events: the device posts none.
trace_absent c_temp_event_not_posted c_temp_event_start c_temp_event_end 'pci_nvme_aer_post_cqe type 0x1' \
	'pci_nvme_aer_post_cqe type 0x[0-9a-f]+ '
echo 69850 >"$RH/temp1_max"
echo 69850 >"$CH/temp1_max"
expect_eq temp_alarm_off_again 0 "$(cat "$RH/temp1_alarm")"

# --- health warnings raised by the host: each seen, the log read, the next one seen too -----
# The device holds health events back until its log is read: a second warning reaches
# the host only if the driver read the log of the first (nothing else reads it here).
warn_and_wait() { # CHARDEV QEMU-ID VALUE
	hmp qom-set "/machine/peripheral/$2" smart_critical_warning "$3"
	wait_for 20 warning_is "$1" "$3"
	sleep 2
}
trace_mark health_start /dev/rnvme0n1
warn_and_wait /dev/rnvme0 "$RID" 4
warn_and_wait /dev/rnvme0 "$RID" 12
trace_mark health_end /dev/rnvme0n1
expect_eq health_warning_in_log 12 "$(warning /dev/rnvme0)"
trace_expect health_events_both_posted health_start health_end eq 2 'pci_nvme_aer_post_cqe type 0x1 info 0x0 lid 0x2'
trace_expect health_log_read health_start health_end ge 2 'pci_nvme_get_log cid [0-9]+ lid 0x2 lsp 0x0 rae 0x0'
trace_mark c_health_start /dev/nvme0n1
warn_and_wait /dev/nvme0 "$CID" 4
bad_doorbell "$PCI" # the control, as above
trace_mark c_health_end /dev/nvme0n1
trace_absent c_health_event_not_posted c_health_start c_health_end 'pci_nvme_aer_post_cqe type 0x1' \
	'pci_nvme_aer_post_cqe type 0x[0-9a-f]+ '
hmp qom-set "/machine/peripheral/$RID" smart_critical_warning 0
hmp qom-set "/machine/peripheral/$CID" smart_critical_warning 0
wait_for 20 warning_is /dev/rnvme0 0

# --- a controller reset: the event configuration set again, an event after it delivered --
# A reset returns the features to their defaults (QEMU 7.2 keeps them, so only its trace of
# the Set Features tells): the driver sets Asynchronous Event Configuration again, to the
# value the device holds now (Get Features).
aec=$(nvme get-feature /dev/rnvme0 -f 0xb 2>/dev/null | sed -n 's/.*Current value: *//p')
aec=$(printf '%#x' "$((${aec:-0}))")
trace_mark aec_reset_begin /dev/rnvme0n1
check reset_before_health_event sh -c 'echo 1 >/sys/class/misc/rnvme0/reset_controller'
wait_for 30 grep -q live /sys/class/misc/rnvme0/state
trace_mark aec_reset_end /dev/rnvme0n1
trace_expect aec_set_again_after_reset aec_reset_begin aec_reset_end eq 1 \
	"pci_nvme_setfeat cid [0-9]+ nsid 0x0 fid 0xb save 0x0 cdw11 $aec\$"
warn_and_wait /dev/rnvme0 "$RID" 4
trace_mark aec_event_end /dev/rnvme0n1
trace_expect health_event_after_reset aec_reset_end aec_event_end eq 1 \
	'pci_nvme_aer_post_cqe type 0x1 info 0x0 lid 0x2'
hmp qom-set "/machine/peripheral/$RID" smart_critical_warning 0
wait_for 20 warning_is /dev/rnvme0 0

# --- error events: a doorbell of a queue that does not exist, twice -------------------------
trace_mark error_start /dev/rnvme0n1
check bad_doorbell_written bad_doorbell "$PCI"
bad_doorbell "$PCI"
trace_mark error_end /dev/rnvme0n1
trace_expect error_events_both_posted error_start error_end eq 2 'pci_nvme_aer_post_cqe type 0x0 info'
trace_expect error_log_read error_start error_end ge 2 'pci_nvme_get_log cid [0-9]+ lid 0x1 lsp 0x0 rae 0x0'
trace_mark c_error_start /dev/nvme0n1
bad_doorbell "$CPCI"
bad_doorbell "$CPCI"
trace_mark c_error_end /dev/nvme0n1
# C leaves the error log to user space: the second error is held back.
trace_expect c_error_second_held_back c_error_start c_error_end eq 1 'pci_nvme_aer_post_cqe type 0x0 info'
expect_eq state_live_after_events live "$(cat /sys/class/misc/rnvme0/state)"
dd if=/dev/urandom of=/tmp/pat bs=64k count=16 2>/dev/null
dd if=/tmp/pat of=/dev/rnvme0n1 bs=64k oflag=direct 2>/dev/null
check io_after_events cmp -n 1048576 /tmp/pat /dev/rnvme0n1
image_write host_image /dev/rnvme0n1 0 1

check rmmod sh -c 'rmmod rnvme && rmmod nvme && rmmod nvme-core'
expect_eq hwmon_gone_after_rmmod "" "$(hwmon_of "$PCI")"
finish
