#!/bin/sh
# After the files are removed (deb postrm, rpm %postun). The user and group
# outbox-cdc stay (see preinstall.sh), and so do the slot and publication
# in Postgres: docs/operations.md, "Retiring the relay".
set -e

case "$1" in
remove | purge | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
