// Package mysqlstore is the MySQL and MariaDB store for package idempotency,
// built on go-sql-driver/mysql. It lives in a module of its own so that the
// driver never reaches users of the root module.
package mysqlstore
