// Package bench compares the retry behaviour and cost of this repository's
// client with a plain http.Client, a naive retry loop and peer libraries.
package bench
