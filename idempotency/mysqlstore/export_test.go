package mysqlstore

// TxBegun reports whether tx has begun its transaction on a connection (a
// test closes that connection from the server to drop it).
func TxBegun(tx *Tx) bool { return tx.tx != nil }
