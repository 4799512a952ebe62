// Package upgradetest holds the upgrade test: the previous release of the
// idempotency stores and this checkout serving the same records on
// PostgreSQL, MariaDB/MySQL and Redis, in place, side by side with kills,
// and back again. It is a module of its own, so that no product module
// requires what it needs.
package upgradetest
