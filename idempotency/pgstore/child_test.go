package pgstore_test

const childModeEnv = "PGSTORE_TEST_CHILD"

func childMain(mode string) int { return 2 }
