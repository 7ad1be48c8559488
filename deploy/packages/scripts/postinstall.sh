#!/bin/sh
# After the files are unpacked (deb postinst, rpm %post). $1 is configure
# (deb; $2 the version before, empty on a first install) or the number of
# versions installed (rpm: 1 on a first install).
set -e

first=false
case "$1" in
configure) [ -n "$2" ] || first=true ;;
1) first=true ;;
esac

# The secrets file, readable by the service and root alone; set on the
# first install only, so that an upgrade keeps what the operator chose.
if $first; then
	for f in /etc/outbox-cdc/outbox-cdc.env /etc/outbox-cdc/outbox-cdc.yaml; do
		if [ -e "$f" ]; then
			chown root:outbox-cdc "$f"
			chmod 0640 "$f"
		fi
	done
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	# An upgrade restarts what runs (each relay drains on SIGTERM, and a
	# standby on another host takes over meanwhile); a first install starts
	# nothing before its settings are written.
	if ! $first; then
		systemctl try-restart outbox-cdc.service 'outbox-cdc@*.service' || true
	fi
fi
