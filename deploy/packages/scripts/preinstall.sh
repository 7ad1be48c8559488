#!/bin/sh
# Before the files are unpacked (deb preinst, rpm %pre): the system group
# and user outbox-cdc, so that the package manager gives the secrets file
# to that group. Idempotent, on Debian (adduser or useradd) and RHEL
# (useradd). Removal leaves both: files they own may outlive the package,
# and a reinstall keeps their ids.
set -e

name=outbox-cdc
shell=$(command -v nologin || echo /usr/sbin/nologin)

if ! getent group "$name" >/dev/null; then
	if command -v groupadd >/dev/null; then
		groupadd --system "$name"
	else
		addgroup --system --quiet "$name"
	fi
fi
if ! getent passwd "$name" >/dev/null; then
	if command -v useradd >/dev/null; then
		useradd --system --gid "$name" --no-create-home --home-dir /nonexistent \
			--shell "$shell" --comment "outbox-cdc relay" "$name"
	else
		adduser --system --ingroup "$name" --no-create-home --home /nonexistent \
			--shell "$shell" --gecos "outbox-cdc relay" --quiet "$name"
	fi
fi
