package mysqlstore

// TxBegun reports whether tx has begun its transaction on a connection (a
// test closes that connection from the server to drop it).
func TxBegun(tx *Tx) bool { return tx.tx != nil }

// RecordID is the primary key of (caller, key)'s record.
func RecordID(caller, key string) []byte { return recordID(caller, key) }
