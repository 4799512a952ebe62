// Package integration_test holds the stores' tests that need a module the
// stores do not: each store's history checked for linearizability with
// storetest/linearize (and its porcupine). It is a module of its own so
// that pgstore's, mysqlstore's and redisstore's go.mod require only what
// their code imports.
package integration_test
