#!/bin/sh
# Before the files are removed (deb prerm, rpm %preun). $1 is remove (deb)
# or 0 (rpm) when the package goes, not on an upgrade.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	# Each relay drains on SIGTERM and lets its slot go.
	systemctl disable --now outbox-cdc.service || true
	systemctl stop 'outbox-cdc@*.service' || true
fi
